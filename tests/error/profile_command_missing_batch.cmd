profile @FILE --device model:k40 -o /tmp/ucplan-error-test-output.json
