profile resnet20 --batch 2 --device model:model:v100 -o @OUT/p.json
