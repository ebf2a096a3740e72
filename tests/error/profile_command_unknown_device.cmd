profile @FILE --batch 4 --device tpu -o /tmp/ucplan-error-test-output.json
