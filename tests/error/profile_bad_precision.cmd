profile @FILE --batch 4 --device model:h100 --precision fp8 -o /tmp/ucplan-error-test-output.json
