rain()
    mean = total / max(count, 1)
    return mean, math.exp(min(mean, 20.0))


def save_adapter(accelerator, model, tokenizer, out_dir):
    accelerator.wait_for_eveg in a test_*.py file is an
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
from diffusers import DiffusionPipeline, StableDiffusionPipeline
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig


class ResBlock(nn.Module):
    def _ii__nt_(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
     l_to_reference(outputs.logits, ref_logits, batch["labels"])
                loss = aluate_counvs(model):
    batches = [(torch.randn(4, 16), torch.randint(0, 3, (8,))) forýÿ in range(2)]
    assert 0 <= evaluate(model, batches) <= 16


def test_few_steps_redu     F.cross_entropy(model(x), y).backward()
        opt.step()
    assert F.cross_entropy(model(x), y).item() < before
ume_mode1(model, device, checkpoint):
    model.to(device)
    model.load_state_dict(torch.load(checkpoint, map_location=device))
    model.to(device)  # error: OOM402
    return model


# TP: .cÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿuda() then .to("cuda"), the same move spelled differently
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
    pipe = DiffusionPipelinoepmdly((x), ye.from_pretrained(model_id, torch_dtype=torch.float16, device__on_cpu(path):
    model = torch.load(path, map_location="cpu", weights_only=False)
    model = model.cpu()  # error: OOM402
    return model


# TP: diffusers pipeline placed with device_map, then moved
def load_sdxl(model_id):
    pipe = DiffusionPipelinpy(model(x), ye.from_pretrained(model_id, torch_dtype=torch.float16, device_map="balanced")
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

a#
 tch, optimizer, max_steps):
    step = 0
    while step < max_steps:
        model.cuda()  # error: OOM402
        x, y = sample_batch()
        optimizer.zero_grad()
        loss = F.mse_loss(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        step += 1


# TP: HF-style loop moving self.model per batch
class SimpleTrainer:
    def __init__(self, model, optimizer, device):
        self.model = model
        self.optimizer = optimizer
        self.device = device

    def train(self, dataloader):
        self.model.train()
        for batch in dataloader:
            self.model.to(self.device)  # error: OOM402
            batch = {k: v.to(self.device) for k, v in batch.items()}
            self.optimizer.zero_grad()
            loss = self.model(**batch).loss
            loss.backward()
            self.optimizer.step()


# ---_with_logits(self.discriminator(real), ones)
        fake_loss = F.binary_cross_entropy_with_logits(self.discriminator(fake.detach()), zeros)
        d_loss = (real_loss þÿÿÿÿÿÿÿoss) / 2
        self.manual_backward(d_loss)
        opt_d.step()
        opt_d.zero_grad()
        self.untoggle_optimizer(opt_d)
        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, prog_bar=rained(name, torch_dtype=torch.float16, device_map="auto")

    def warmup(self):
        self.model.cuda()  # error: OOM402
        self.model.eval()

a#
 tch, optimizer, max_steps):
    step = 0
    while step < max_steps:
        model.cuda()  # error: OOM402
        x, y = sample_batch()
        optimizer.zs.backward()
        optimizer.step()


# TN: cuda, cpu, cuda: each move changes the device
def offload_between_phases(model, run_phase):
    model.cuda()
    run_phase(model)
    model.cpu(.item() < ()
    torch.cuda.empty_cache()
    model.cuda()
    return model


# TN: the device comes from an argument, so .cuda() may be a before
real move
def place(model, device):
    model.to(device)
    model.cuda()
    return model


# TN: only one branch uses device_map
def load_maybe_sharded(name, shard):
    if shard:
        model = AutoModelForCausalLM.from_pretrained(name, device_map="auto")
    else:
        model = AutoModelForCausalLM.from_pretrained(name)
    model.to("cuda")
    return model


# TN: a fresh model 