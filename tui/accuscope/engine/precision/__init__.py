"""Mixed precision: convert an ONNX model to fp16 or int8 keeping chosen ops in fp32, search the
smallest such set that meets an accuracy target, and write it out in the forms toolchains take."""
