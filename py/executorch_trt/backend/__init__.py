"""``TensorRTBackend.preprocess`` and what it decides for one partition: the binding contract
(``bindings``: delegate argument order), the in-place alias decision (``aliases``), both read off
the canonicalised partition (``analysis``), and the diagnostics that explain every buffer update
ExecuTorch still copies back (``diagnostics``)."""
