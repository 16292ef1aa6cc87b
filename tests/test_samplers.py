"""The two samplers of dspark_mini/sampling.py: "portable" (the lab's screens: generate, walk, serve, the presenter)
and "torch" (what the shipped measurements drew with). A generator's type picks the draw; the lab's commands draw
the portable way, so the same seed gives the same tokens wherever the lab runs."""

from __future__ import annotations

import json

import pytest
import torch

from dspark_mini.portable_random import PortableGenerator
from dspark_mini.portable_random import sample as portable_sample
from dspark_mini.portable_random import uniform as portable_uniform
from dspark_mini.sampling import new_generator, sample, uniform
from dspark_mini.speculative import generate_plain, generate_speculative
from dspark_mini.tokenizer import default_tokenizer
from lab.cli import main
from lab.weights import lab_model

PROMPT = "The quick brown fox"


def test_new_generator_gives_each_sampler_its_generator():
    assert isinstance(new_generator(7, sampler="portable"), PortableGenerator)
    g = new_generator(7, sampler="torch")
    assert isinstance(g, torch.Generator) and g.initial_seed() == 7
    with pytest.raises(ValueError, match=r"sampler = 'numpy' is invalid: allowed 'portable', 'torch'"):
        new_generator(7, sampler="numpy")
    with pytest.raises(ValueError, match=r"seed = -1 is invalid"):
        new_generator(-1, sampler="portable")


def test_sample_and_uniform_draw_the_portable_way_for_a_portable_generator():
    probs = torch.softmax(torch.randn(3, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64), -1)
    a, b = PortableGenerator(11), PortableGenerator(11)
    assert torch.equal(sample(probs, a), portable_sample(probs, b)) and a.counter == b.counter == 3
    assert uniform(a) == portable_uniform(11, 0, 3) and a.counter == 4  # the next counter of the same stream
    t = torch.Generator().manual_seed(3)
    assert 0.0 <= uniform(t) < 1.0  # torch's draw for a torch generator


@pytest.fixture(scope="module")
def model():
    return lab_model()


def test_generation_is_reproducible_per_sampler_and_the_samplers_differ(model):
    ids = torch.tensor([default_tokenizer().encode(PROMPT)])
    runs = {
        s: [generate_speculative(model, ids, 24, None, 1.0, 5, sampler=s).tokens for _ in range(2)]
        for s in ("portable", "torch")
    }
    assert runs["portable"][0] == runs["portable"][1] and runs["torch"][0] == runs["torch"][1]
    assert runs["portable"][0] != runs["torch"][0]  # 24 tokens at T = 1 from two different draw streams
    greedy = {s: generate_plain(model, ids, 12, 0.0, 5, sampler=s).tokens for s in ("portable", "torch")}
    assert greedy["portable"] == greedy["torch"]  # greedy draws nothing


def test_the_generate_command_draws_the_portable_way(model, capsys):
    """`dspark-lab generate --temperature 1 --seed 3` gives the tokens of generate_*(…, sampler="portable")."""
    args = ["--temperature", "1", "--seed", "3", "--max-new-tokens", "20", "--json"]
    code = main(["generate", "--prompt", PROMPT, *args])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    ids = torch.tensor([out["prompt_ids"]])
    spec = generate_speculative(model, ids, 20, None, 1.0, 3, sampler="portable")
    plain = generate_plain(model, ids, 20, 1.0, 3, sampler="portable")
    assert out["speculative"]["tokens"] == spec.tokens[0] and out["plain"]["tokens"] == plain.tokens[0]
