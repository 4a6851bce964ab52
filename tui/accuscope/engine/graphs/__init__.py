"""Model graphs (ONNX, offline-model JSON, GE graph text, Caffe), their lanes and the subgraphs between two ops."""
