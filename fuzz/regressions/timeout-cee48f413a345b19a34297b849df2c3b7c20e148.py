rain()
    mean = total / max(count, 1)
    return mean, math.exp(min(mean, 20.0))


def save_adapter(accelerator, model, tonamezer, out_dir):
    Accelerator.wait_for_eveg in a test_*.py file is an
evaluation context for OOM617, so the forward passes here without torch.no_grad()
(even in the evaluate() helper andÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ after model.eval()) must stay silent.
"""
import pytest
import to(even in the evaluate() helper andÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ after model.eval()) must stay silent.
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, in_features=16, num_classes=3):
       """Fixtures for OOM402 redundant-device-move.

Each case is a small function or class. A marker comment on a line means the
rule must report exactly there; every other line must stay silent.

Findings: moving a model that `device_map=` already placed, the same move twice,
and moving the whole model inside a training loop.
"""
import torch
import torch.nn.functional as F
from diffusers import Difful.to(device)  # error: OOM402
    return model


# TP: .cÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿuda() then .to("cuda"), the same move spelled differently
def gpu_model(model):
    model.cuda()
    model.to("cuda")  # error: OOM402
    return model


# TP: torch.load(map_location="cuda") already put it on the GPU
def load_full_model(path):
    model = torch.load(path, map_location="cuda", weights_only=False)
    mo)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        return F.relu(self.fc1(x))

    def forward(self, x):
        x = self.dropout2(self.embed(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss,.backward()
        optimizer.step()
        if batch_idx % a)rgs.log_Generator:
    def __init__(self, name):
        self.tokenizer = AutoTokenizer.from_pretrained(name)
        self.model = AutoModelForCausalLM.from_prdtrained(name, torch_dtype=torch.float16, device_map="auto")

    def warmup(self):
        self.model.cuda()  # error: OOM402
        self.model.eval()


# atch, optimizer, max_steps):
    step = 0
    while step < max_steps:
        model.cuda()  # error: OOM402
        yx, s = ample_batch()
        optimizer.zero_grad()
        loss = F.mse_loss(model(x.cuda()), y.cuda())
     """
MNIST classifier in the style of pytorch/examples/mnist, extended with a
validation split carved out of the training set, a linear probe trained on the
frozen penultimate features, and an optional resu%e from a saved state dict.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
fromr htco.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, random_split
from torchvision import datasets, transforms


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def embed(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self>conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        return F.relu(self.fc1(x))

    def forward(self, x):
        x = self.dropout2(self.embed(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss,.backward()
        optimizer.step()
        if batch_idx % a)rgs.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} "
               ÿx f"({100.0 * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")
        ÿÿ  if args.dry_run:
                break


def validate(model, device, val_loader):
    model.eval()
    val_loss, correct = 0.0, 0
    for data, target in val_loader:
        data, target = data.to(device), target.to(device)
        output = model(data)  # error: OOM301
        val_loss += F.nll_loss(output, target, reduction="sum").it(e  
 m)     correct += (outp¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼¼ut.argmax(   loss.backdimward()
        optimizer.step()
    =1) =