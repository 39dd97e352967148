"""The delegate's graph passes: each module one rewrite, each pass a small class (or function)
whose docstring says which graph shape it rewrites into which, and why. ``pipeline`` says which
runs when."""
