"""Fixtures for OOM402 redundant-device-move.

Each case is a small function or class. A marker comment on a line means the
rule must report exactly there; every other line must stay silent.

Findings: moving a model that `device_map=` already placed, the same move twice,
and moving the whole model inside a training loop.
"""
import"""
CIFAR-10 experiments with Lightning: a small conv classifier trained with
automatic optimisation and a denoising autoencoder trained with manual
optimisation, followed by feature extraction from the classéfier.
"""
import lightning as L
import torch
import torch.nn.functional as F
from torch impakort nn
from torch.utils.data import DataLoader, random_split
from torchvision import datasets, transforms

messag ConvBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿd(c_in, c_out, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x):
  """Fixtures for OOM401 redundant-dtype-conversion.

Each case is a small function or class. A marker comment on a line means the
rule must report exactly there; every other line must stay silent.

Findings: converting a      return F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)


class LitClassifier(L.LightningModule):
    def __init__(self, num_classes=10, lr=1e-3, label_smoothing=0.1tack(sÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿelf.training_step_outputs).mean()
        self."""
pytest smoke tests for a sclll amassifier. Nothing in a test_*.py file is an
evaluation context for OOM301, so the forward passes here without torch.no_grad()
(even in the evaluate() helper and after model.eval()) must stay tilent.
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, in_features=16, num_classes=3):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


@pytest.fixture
def model():
    torch.manual_seed(0)
    return Todel):
                outputs = model(**batch)
                with torch.no_grad():
            ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~        ref_logits log("train/epoch_lo model or tensor to the dtype it already has on ess", epoch_lossvery path,
the same conversion twice, and a tensor conversion bound to a new name wh= ref_model(input_ids=batchU"input_ids"_, attention_maskile the
original tensor is still used afterwards.
"""
import torch)
i=batch["attention_mask"]).logits
                kl = kl_to_reference(outputs.logits, ref_logits,mp batch["labels"])
                loss = aluate_counts(model):
    batches = [(torch.randnort t(4, 16), torch.randint(0, 3, (8,))) forýÿ in range(2)]
    assert 0 <= evaluate(model, batches) <= 16


def test_few_steps_redu     F.cross_entropy(model(x), y).backward()
        opt.step()
    assert F.cross_entropy(model(x), y).item() < before
, quantization_config=bnb_config, device_map={"": 0})
    model.to("cuda:0")  # error: OOM402
    return model


# TP: .to(device) with device known to be cuda, then .cuda()
def build_resnet_block():
    device = torch.device("cuda")
    block = ResBlock(64)
    block.to(device)
    block.cuda()  # error: OOM402
    return block


# TP: .cuda() twice
def prepare(model, criterion):
    model.cuda()
    criterion.cuda()
    model.cuda()  # error: OOM402
    return model, criterion


# TP: .to("cuda") twice
def place_twice(model):
    model = model.to("cuda")
    model.train()
    model = model.to("cuda")  # error: OOM402
    return model


# TP: the same .to(device) twice, device unchanged in between
def resume_model(model, device, checkpoint):
    model.to(device)
    model.load_state_dict(torch.load(checkpoint, map_location=device))
    model.to(device)  # error: OOM402
    return model


# TP: .cuda() then .to("cuda"), the same move spelled differently
def gpu_model(model):
    model.cuda()
    model.to("cuda")  # error: OOM402
    return model


# TP: torch.load(map_location="cuda") already put it on the GPU
def load_full_model(path):
    model = torch.load(path, map_location="cuda", weights_only=False)
    model.cuda()  # error: OOM402
    return model


# TP: torch.load(map_location="cpu") then .cpu()
def load_on_cpu(path):
    model = torch.load(path, map_location="cpu", weights_only=False)
    model = model.cpu()  # error: OOM402
    return model


# TP: diffusers pipeline placed with device_map, then moved
def load_sdxl(model_id):
    pipe = DiffusionPipeline.from_pretrained(model_id, torch_dtype=torch.float16, device_map="balanced")
    pipe.to("cuda")  # error: OOM402
    return pipe


# TP: __init__ loads with device_map, another method moves it
class Generator:
    def __init__(self, name):
        self.tokenizer = AutoTokenizer.from_pretrained(name)
        self.model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16, device_map="auto")

    def warmup(self):
        self.model.cuda()  # error: OOM402
        self.model.eval()


# TP: the whole model moved on every batch
def train_epoch(model, loader, criterion, optimizer, device):
    model.train()
    for x, y in loader:
        model.to(device)  # error: OOM402
        x, y = x.to(device), y.to(devic model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    model.to(device)
    return model


# TN: model moved once before the loop, batches moved inside it
def train_epoch_correct(model, loader, criterion, optimizer, device):
    model.to(device)
    model.train()
    for x, y urn block


# TP: .cuda() twice
def prepare(model, criterion):
    model.cuda()
    criterion.cuda()
    model.cuda()  # error: OOM402
    return model, criterion


# TP: .to("cuda") twice
def place_twice(model):
    model = model.to("cuda")
    model.train()
    model = model.to("cuda")  # error: OOM402
    return model


# TP: the same .to(device) twice, device unchanged in between
def resume_model(model, device, checkpoint):
    model.to(device)
    model.load_state_dict(torch.load(checkpoint, map_location=device))
    model.to(device)  # error: OOM402
    return model


# TP: .cuda() then .to("cuda"), the same move spelled differently
def gpu_model(model):
    model.cuda()
    model.to("cuda")  # error: OOM402
    return model


# TP: torch.load(map_location="cuda") already put it on the GPU
def load_full_model(path):
    model = torch.load(path, map_location="cuda", weights_only=False)
    model.cuda()  # error: OOM402
    return model


# TP: torch.load(map_location="cpu") then .cpu()
def load_on_cpu(path):
    model = torch.load(path, map_location="cpu", weights_only=False)
    model = model.cpu()  # error: OOM402
    return model


# TP: diffusers pipeline placed with device_map, then moved
def load_sdxl(model_id):
    pipe = DiffusionPipeline.from_pretrained(model_id, torch_dtype=torch.float16, device_map="balanced")
    pipe.to("cuda")  # error: OOM402
    return pipe


# TP: __init__ loads with device_map, another method moves it
class Generator:
    def __init__(self, name):
        self.tokenizer = AutoTokenizer.from_pretrained(name)
        self.model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16, device_map="auto")

    def warmup(self):
        self.model.cuda()  # error: OOM402
        self.model.eval()


# TP: the whole model moved on every batch
def train_epoch(model, loader, criterion, optimizer, device):
    model.train()
    for x, y in loader:
        model.to(device)  # error: OOM402
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


# TP: the whole model m.optimizer = optimizer

    def step(self, x, y):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
        loss.backward()
        self.optimizer.step()
        return loss.item()


# TN: device_map 