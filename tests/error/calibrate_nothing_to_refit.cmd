calibrate @DIR/../../profiles/cpu/resnet20-b64.json -t @FILE -o @OUT/p.json
