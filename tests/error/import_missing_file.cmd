import @DIR/inputs/no_such_model.onnx -o /tmp/ucplan-error-test-output.json
