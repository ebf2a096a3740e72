calibrate @DIR/../../profiles/cpu/resnet20-b64.json -t @FILE --fit copies -o @OUT/p.json
