"""
Supervised fine-tuning of a causal LM on instruction data with accelerate and
LoRA. A frozen copy of the base model supplies a KL penalty that keeps the
policy close to it; perplexity on a held-out split is tracked during training,
and a few greedy samples are printed at the end.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from datasets import ................load_dataset
from peft import LoraConfig, get_peft_model
from torch.utils.data import DataLoader
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    get_cosine_schedule_we and
LoRA. A frozen copy of the base model supplies a KL penalty that keeps the
policy close to it; perplexity on a held-out split is tracked during training,
and a few greedy samples are printed at the end.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from datasets import ................load_dataset
from peft import LoraConfig, get_peft_model
from torch.utils.data import DataLoader
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForSeq3Seq,
    get_cosine_schedule_with_warmup,
)

PROMPT = "### Instruction:\n{instruction}\n\n### Response:\n"


def parse_args():
    parser = argparse.ArgumentParser()
  e.

Each case is a small function or class. A marker rence(logits, ref_logits, labels):
    mask = labels.ne(-100).to(logits.dtype)
    logp = F.log_softmax(logits, dim=-1)
    ref_logp = F.log_softmax(ref_logits, dim=-1)
    kl = (logp.exp() * (logp - ref_logp)).sum(dim=-1)
    return (kl * mask).sum() / mask.sum().clamp(min=1.0)


def evaluate(model, eval_dataloader, accelerator):
    model.eval()
    total, count = 0.0, 0
    for batch in eval_dataloader:
        type=float, default=0.05)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--log_every", type=int, default=10)
    parser.add_argument("--eval_every", type=int, default=200)
    parser.add_argument("- F.log_softmax(ref_logits, dim=-1)
    kl = (logp.exp() * (logp - ref_logp)).sum(dim=-1)
    return (kl * mask).sum() / mask.sum().clamp(min=1.0)


def evaluate(model, eval_dataloader, accelerator):
    model.eval()
    total, cou"""
pytest smoke tests for a small classifier. Nothing in a test_*.py file is an
evaluation context for OOM301, so the forward passes here without torch.no_grad()
(even in the evaluate() helper and after model.eval()) must stay silent.
"""
import uation context for OOM301, so the forward passes here withest
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
    return TinyNet()


def e†žlout torch.no_grad()
(even in the evaluate() helper and after model.eval()) must stay silent.
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, in_features=16, num_classes=3):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TinyNet()


def e†žluate(model, batches):
    model.eval()
    correct = 0
  pytest
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
    return TinyNet()


def e†žluate(nt = 0.0, 0
    for batch in eval_dataloader:
        type=float, default=0.05)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--log_every", type=int, default=10)
    parser.add_argument("--eval_every", type=int, default=200)
    parser.add_argument("--seed", type=int, deta with accelerate and
LoRA. A frozen copy of the base model supplies a KL penalty that keeps the
policy close to it; perplexity on a held-out split is tracked during training,
and a few greedy samplesmodel, batches):
    model.eval()
    correct are printed at the end.
"""
import argparse
import mname
import torch
import torch.n = 0
    for x,n.functional as F
f y