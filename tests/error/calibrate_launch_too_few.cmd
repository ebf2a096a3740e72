calibrate @DIR/../../profiles/cpu/resnet20-b64.json -t @FILE --fit launch -o @OUT/p.json
