"""A short run: its checkpoints are regenerated bit for bit from the seed by the command, load with transformers'
from_pretrained, and carry the metrics and state the store ingests."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from pipeline.cli_args import flags
from pipeline.induction import data, scores
from pipeline.induction.settings import PROGRAM, Settings, command_for
from pipeline.induction.train import train

# from_pretrained initialises the empty MLP weights of an attention-only checkpoint before loading, and torch says
# that doing so does nothing (pipeline/induction/model.py)
pytestmark = pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")
ROOT = Path(__file__).resolve().parents[3]
SHORT = Settings(seed=5, vocab=16, half=6, min_half=4, max_half=8, batch=8, eval_batch=8, hidden=16, heads=4,
                 lr=1e-2, steps=12, log_checkpoints=4, loss_step=0.01)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("induction") / "run"
    return out, train(SHORT, out, log=lambda line: None)


def checkpoints(out: Path) -> dict[int, Path]:
    return {int(p.name.removeprefix("checkpoint-")): p for p in out.glob("checkpoint-*")}


def test_the_command_regenerates_the_checkpoints_bit_for_bit(short_run, tmp_path):
    out, record = short_run
    again = tmp_path / "again"
    changed = {k: v for k, v in asdict(SHORT).items() if v != Settings.__dataclass_fields__[k].default}
    argv = [sys.executable, "-m", "pipeline.induction", "train", str(again), *" ".join(flags(changed)).split()]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, timeout=300)
    assert command_for(SHORT, str(again)) == " ".join([PROGRAM, *argv[4:]])
    ours, theirs = checkpoints(out), checkpoints(again)
    assert sorted(ours) == sorted(theirs) == sorted(map(int, record["checkpoints"]))
    for step in ours:
        for name in ("model.safetensors", "metrics.json", "trainer_state.json", "config.json"):
            assert (ours[step] / name).read_bytes() == (theirs[step] / name).read_bytes(), (step, name)
    # and the bytes are the seed's: another seed's last checkpoint differs
    other = train(Settings(**asdict(SHORT) | {"seed": 6}), tmp_path / "other", log=lambda line: None)
    last = SHORT.steps
    assert (tmp_path / "other" / f"checkpoint-{last}" / "model.safetensors").read_bytes() != \
        (out / f"checkpoint-{last}" / "model.safetensors").read_bytes()
    assert other["curve"]["loss_repeated_half"] != record["curve"]["loss_repeated_half"]


def test_a_checkpoint_loads_with_from_pretrained_and_holds_its_metrics(short_run):
    out, record = short_run
    found = checkpoints(out)
    assert {0, SHORT.steps} <= set(found)
    assert {"log", "loss"} == {why for reasons in record["checkpoints"].values() for why in reasons}
    tokens = data.eval_batch(SHORT.eval_batch, SHORT.half, SHORT.vocab)
    for step in (0, SHORT.steps):
        folder = found[step]
        net = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
        assert net.config.model_type == "llama" and net.config.num_hidden_layers == 2
        state = json.loads((folder / "trainer_state.json").read_text())
        assert state["global_step"] == step and state["kept_because"] == record["checkpoints"][str(step)]
        metrics = json.loads((folder / "metrics.json").read_text())
        assert set(metrics) == {"scalars", "heads"}
        assert set(metrics["scalars"]) == {"loss_first_half", "loss_repeated_half"}
        assert set(metrics["heads"]) == {"induction_score", "previous_token_score"}
        for per_head in metrics["heads"].values():
            assert [len(row) for row in per_head] == [SHORT.heads] * 2
        again = scores.measure(net, tokens, SHORT.half)
        assert again["scalars"] == pytest.approx(metrics["scalars"], abs=1e-6)
        for name, per_head in metrics["heads"].items():
            np.testing.assert_allclose(again["heads"][name], per_head, atol=1e-6)
        assert metrics["scalars"]["loss_repeated_half"] == record["curve"]["loss_repeated_half"][step]


def test_the_model_is_attention_only(short_run):
    """mlp_size 0 (the default): the MLP's weights are empty and it adds exactly 0 to the residual stream."""
    out, _ = short_run
    net = AutoModelForCausalLM.from_pretrained(out / f"checkpoint-{SHORT.steps}")
    x = torch.randn(3, 5, SHORT.hidden)
    for layer in net.model.layers:
        assert all(p.numel() == 0 for p in layer.mlp.parameters())
        assert torch.equal(layer.mlp(x), torch.zeros_like(x))


def test_training_refuses_a_folder_with_files(short_run):
    out, _ = short_run
    with pytest.raises(FileExistsError, match="not an empty folder"):
        train(SHORT, out, log=lambda line: None)


def test_help_loads_neither_torch_nor_transformers():
    code = ("import sys\nfrom pipeline.induction.__main__ import main\ntry:\n    main(['train', '--help'])\n"
            "except SystemExit:\n    pass\nprint('heavy:', sorted({'torch', 'transformers'} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "--loss-step" in proc.stdout and proc.stdout.endswith("heavy: []\n")


def test_settings_refuse_what_cannot_train():
    with pytest.raises(ValueError, match="multiple of --heads"):
        Settings(hidden=30, heads=4)
    with pytest.raises(ValueError, match="--min-half"):
        Settings(min_half=10, max_half=9)
    proc = subprocess.run([sys.executable, "-m", "pipeline.induction", "train", "x", "--heads", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "multiple of --heads" in proc.stderr
