"""Reading and editing FX graphs, shared by the passes and the partitioner: which nodes the
delegate takes (``operator_support``), what a program mutates (``mutations``), dynamic sizes
(``dynamic_shapes``) and small graph edits (``edit``)."""
