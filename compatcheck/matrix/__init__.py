"""`compatcheck matrix`: every model on every environment, merged into one grid and gated on a baseline."""
