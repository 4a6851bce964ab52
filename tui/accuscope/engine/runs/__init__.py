"""Running models to produce dumps (onnxruntime)."""
