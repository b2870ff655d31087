"""Published numbers of TernGrad (Wen et al. 2017), copied from the paper (../shared/papers/terngrad.md)."""

from __future__ import annotations

# Figure 3 (LeNet, MNIST; curves only): "The maximum accuracy gain is 0.15% and the maximum accuracy loss
# is 0.22%" (§4.1), "No degradation is observed even for N = 64".
FIG3_MAX_GAIN_PCT = 0.15
FIG3_MAX_LOSS_PCT = 0.22
FIG3_PANELS = {"momentum": "(a) momentum SGD, base LR 0.01", "vanilla": "(b) vanilla SGD, base LR 0.1"}

# Table 1 (CifarNet, CIFAR-10, Adam, base LR 0.0002):
# workers -> (total mini-batch, iterations, floating accuracy %, TernGrad accuracy %)
TABLE1 = {2: (128, "300K", 86.56, 85.64), 16: (2048, "18.75K", 83.19, 82.80)}

#: where Table 1's recipe here departs from the authors' CifarNet script (github.com/wenwei202/terngrad,
#: terngrad/run_multi_gpus_cifar10.sh: NET=cifar10_alexnet, OPTIMIZER=adam, BASE_LR=0.0002, CLIP_FACTOR=2.5,
#: QUANTIZE_LOGITS=True, as ours): (what, the authors' script, ours, the param of ours the runs carry or "")
TABLE1_SCRIPT = "terngrad/run_multi_gpus_cifar10.sh (github.com/wenwei202/terngrad)"
TABLE1_DEVIATIONS = [
    ("weight decay", "0.004 (WEIGHT_DECAY; cifar10_alexnet's default)", "0 (the preset: not stated in the paper)",
     "optimizer.weight_decay"),
    ("learning rate", "decayed every 200 epochs (NUM_EPOCHS_PER_DECAY=200)",
     "constant: no steps (Table 1 gives no decay)", "optimizer.milestones"),
    ("training images", "random 24×24 crops, mirroring, brightness/contrast jitter", "the centre 24×24 crop", ""),
    ("parameters evaluated", "the moving average (RESTORE_AVG_VAR=True)", "the final parameters", ""),
]  # fmt: skip

# Table 2 (AlexNet, ImageNet): (base LR, mini-batch, workers, iterations, gradients, weight decay, DR, top-1 %, top-5 %)
TABLE2 = [
    (0.01, 256, 2, "370K", "floating", 0.0005, 0.5, 57.33, 80.56),
    (0.01, 256, 2, "370K", "TernGrad", 0.0005, 0.2, 57.61, 80.47),
    (0.01, 256, 2, "370K", "TernGrad-noclip", 0.0005, 0.2, 54.63, 78.16),
    (0.02, 512, 4, "185K", "floating", 0.0005, 0.5, 57.32, 80.73),
    (0.02, 512, 4, "185K", "TernGrad", 0.0005, 0.2, 57.28, 80.23),
    (0.04, 1024, 8, "92.5K", "floating", 0.0005, 0.5, 56.62, 80.28),
    (0.04, 1024, 8, "92.5K", "TernGrad", 0.0005, 0.2, 57.54, 80.25),
]

# Table 3 (GoogLeNet, ImageNet): (base LR, mini-batch, workers, iterations, gradients, weight decay, DR, top-5 %)
TABLE3 = [
    (0.04, 128, 2, "600K", "floating", 4e-5, 0.2, 88.30),
    (0.04, 128, 2, "600K", "TernGrad", 1e-5, 0.08, 86.77),
    (0.08, 256, 4, "300K", "floating", 4e-5, 0.2, 87.82),
    (0.08, 256, 4, "300K", "TernGrad", 1e-5, 0.08, 85.96),
    (0.10, 512, 8, "300K", "floating", 4e-5, 0.2, 89.00),
    (0.10, 512, 8, "300K", "TernGrad", 2e-5, 0.08, 86.47),
]

# §5 / Figure 5 (performance model; curves only): "TernGrad can have 3.04× training speedup for AlexNet on
# 8 GPUs" (1 GbE cluster, Fig 5a); "TernGrad is still able to double the training speed of VggNet-A on
# 128 nodes" (InfiniBand cluster, Fig 5b; 128 nodes × 4 GPUs). Per-GPU mini-batch 128, 64, 32.
FIG5_ALEXNET_8GPU_1GBE = 3.04
FIG5_VGG_A_128_NODES_IB = 2.0
