"""The formats the exporter writes and the C++ runtime reads, and the names and numbers both
agree on: ``wire`` (backend id, engine names, dtypes, blob constants), ``scalar_types``
(ExecuTorch's dtype codes), ``blob`` (the delegate blob), ``portable_payload`` (the portable
engine's payload). Depends on torch only; the runtime and the inspection read these."""
