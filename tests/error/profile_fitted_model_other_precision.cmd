profile resnet20 --batch 2 --device model:h100-fit --precision bf16 -o @OUT/p.json
