import @DIR/inputs/unsupported_op.onnx -o /tmp/ucplan-error-test-output.json
