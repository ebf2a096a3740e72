import @FILE -o /tmp/ucplan-error-test-output.json
