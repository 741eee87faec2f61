#!/usr/bin/env python3
"""The GPT-2-style training step of examples/transformer_lm in PyTorch, timed the way
graphstep_bench times its own (CUDA events, warm-up, median of steps), in three modes:

- eager: the step as PyTorch users write it;
- graphed: the whole step (zero_grad, forward, loss, backward, clipping, AdamW) captured once
  with torch.cuda.graph and replayed, warmed up on a side stream as its documentation asks;
- compile_reduce_overhead: torch.compile(model, mode="reduce-overhead") for forward and loss
  (CUDA graphs of the compiled forward and backward), backward call and optimizer eager.

The model has graphstep's structure: token and position embeddings, pre-norm blocks (layer
norm, causal self-attention through one qkv projection, output projection, residual; layer
norm, fc1, tanh GELU, fc2, residual), a final layer norm, logits through the tied token
embedding over the vocabulary padded to a multiple of 64, cross-entropy over the real
vocabulary. fp32 parameters under bf16 autocast (graphstep keeps bf16 weights with fp32
masters), AdamW with weight decay on matrices and embeddings only, gradients clipped to a
global norm of 1. One fixed batch of random tokens, the targets the inputs shifted by one.

Per configuration and mode: median GPU time per step (median_us), median host time to issue a
step (host_us), the losses of the first three steps (about ln(vocab) at first), the loss at the
last step, peak memory, and for graphed the capture and instantiation times (before PyTorch 2.8
the capture time includes the instantiation). The first three steps run one at a time to read
their losses (for graphed they are the side-stream warm-up before capture), then --warmup more,
then --steps timed ones, so every mode of a configuration makes the same number of updates and
their last losses can be compared.

    pytorch_transformer.py [--configs launch_bound,compute_bound] [--device cuda|cpu]
                           [--steps 50] [--warmup 5]

--device cpu runs the eager mode only and times it with the host clock: a smoke test
(`--device cpu --configs tiny --steps 3 --warmup 1` takes seconds). Prints JSON; when PyTorch
or a GPU is missing it says so in the JSON and exits 0. A mode that fails is recorded with its
error and the others go on; the exit status is 1 when eager or graphed failed (a compile
failure is recorded only: it depends on the toolchain more than on this script)."""

import argparse
import contextlib
import gc
import json
import math
import statistics
import sys
import time

# name: layers, width, heads, batch, sequence, vocabulary (as examples/transformer_lm and
# bench/transformer_step_bench.cpp define them; tiny is for smoke tests).
CONFIGS = {
    "launch_bound": (12, 768, 12, 1, 128, 50257),
    "compute_bound": (12, 768, 12, 16, 1024, 50257),
    "tiny": (2, 64, 4, 2, 16, 512),
}
CUDA_MODES = ("eager", "graphed", "compile_reduce_overhead")
LOSS_STEPS = 3  # steps whose loss is read before warm-up
SEED = 1337


def padded(vocab: int) -> int:
    """The vocabulary rounded up to a multiple of 64, as graphstep's output projection has it."""
    return (vocab + 63) // 64 * 64


def build_model(torch, layers: int, width: int, heads: int, sequence: int, vocab: int):
    """The GPT-2-style decoder, initialized as GPT-2 is (on the CPU, so that every device and
    mode starts from the same weights)."""
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(width, eps=1e-5)
            self.c_attn = nn.Linear(width, 3 * width)  # q | k | v
            self.c_proj = nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width, eps=1e-5)
            self.fc1 = nn.Linear(width, 4 * width)
            self.fc2 = nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(padded(vocab), width)
            self.wpe = nn.Embedding(sequence, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(width, eps=1e-5)

        def forward(self, tokens, targets):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(positions)
            for block in self.blocks:
                x = block(x)
            # Tied output projection over the padded vocabulary; the loss sees the real one.
            logits = F.linear(self.ln_f(x), self.wte.weight)[..., :vocab]
            return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    torch.manual_seed(SEED)
    model = Decoder()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, 0.02)
            if isinstance(module, nn.Linear):
                module.bias.zero_()
        # No token selects the padded rows: zero, as graphstep leaves them.
        model.wte.weight[vocab:].zero_()
    return model


def make_optimizer(torch, model, capturable: bool):
    """AdamW as graphstep's: decay on matrices and embeddings, none on biases and norms."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-4, betas=(0.9, 0.95), eps=1e-8, capturable=capturable)


def make_batch(torch, batch: int, sequence: int, vocab: int, device):
    """One fixed batch of random token sequences; the targets are the inputs shifted by one."""
    generator = torch.Generator().manual_seed(SEED)
    tokens = torch.randint(0, vocab, (batch, sequence + 1), generator=generator)
    return (tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device))


def capture(torch, step, row: dict):
    """The step captured once with torch.cuda.graph (after its warm-up); the capture and
    instantiation times go to row. Returns a function that replays the graph and returns the
    loss tensor it writes."""
    try:
        # Kept until instantiate(), so that capture and instantiation are timed apart.
        graph, separate = torch.cuda.CUDAGraph(keep_graph=True), True
    except TypeError:  # PyTorch before 2.8 instantiates as the capture ends
        graph, separate = torch.cuda.CUDAGraph(), False
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.cuda.graph(graph):
        static_loss = step()
    torch.cuda.synchronize()
    row["capture_ms"] = (time.perf_counter() - start) * 1e3
    if separate:
        start = time.perf_counter()
        graph.instantiate()
        torch.cuda.synchronize()
        row["instantiate_ms"] = (time.perf_counter() - start) * 1e3

    def replay():
        graph.replay()
        return static_loss

    return replay


def run_mode(torch, name: str, mode: str, device, steps: int, warmup: int) -> dict:
    """Builds a fresh model for one (configuration, mode), trains it and returns its row."""
    layers, width, heads, batch, sequence, vocab = CONFIGS[name]
    cuda = device.type == "cuda"
    model = build_model(torch, layers, width, heads, sequence, vocab).to(device)
    optimizer = make_optimizer(torch, model, capturable=(mode == "graphed"))
    tokens, targets = make_batch(torch, batch, sequence, vocab, device)
    forward = model
    if mode == "compile_reduce_overhead":
        forward = torch.compile(model, mode="reduce-overhead")
    parameters = list(model.parameters())
    row = {"parameters": sum(p.numel() for p in parameters)}

    def step():
        # Gradients are kept (and zeroed in place) where the step is captured: the graph's
        # backward writes into the same tensors on every replay.
        optimizer.zero_grad(set_to_none=(mode != "graphed"))
        # Autocast caches its casts across calls; a captured region must not (the documentation
        # of torch.cuda.make_graphed_callables asks for cache_enabled=False with graphs).
        with torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=(mode != "graphed")):
            loss = forward(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        return loss

    # The first steps, one at a time, for their losses (and compilation, where there is one).
    # For graphed they are the warm-up on a side stream that torch.cuda.graph asks for.
    side = torch.cuda.Stream() if mode == "graphed" else None
    if side is not None:
        side.wait_stream(torch.cuda.current_stream())
    losses = []
    with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
        for i in range(LOSS_STEPS):
            start = time.perf_counter()
            losses.append(step().item())
            if i == 0:
                row["first_step_ms"] = (time.perf_counter() - start) * 1e3
    if side is not None:
        torch.cuda.current_stream().wait_stream(side)
    row["losses"] = losses

    run = capture(torch, step, row) if mode == "graphed" else step
    for _ in range(warmup):
        loss = run()
    if cuda:
        torch.cuda.synchronize()
    gpu_us, host_us = [], []
    for _ in range(steps):
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
        host_start = time.perf_counter()
        loss = run()
        host_us.append((time.perf_counter() - host_start) * 1e6)
        if cuda:
            stop.record()
            stop.synchronize()
            gpu_us.append(start.elapsed_time(stop) * 1e3)
    # On the CPU the step runs as it is issued: its host time is its time.
    row["median_us"] = statistics.median(gpu_us if cuda else host_us)
    row["host_us"] = statistics.median(host_us)
    row["last_loss"] = loss.item()
    if cuda:
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return row


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="launch_bound,compute_bound",
                        help="comma-separated, of: " + ", ".join(CONFIGS))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: eager only, timed by the host clock (a smoke test)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5,
                        help="untimed steps after the first three")
    args = parser.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown or not args.configs:
        parser.error(f"unknown configuration(s) {', '.join(unknown) or '(none given)'}; "
                     f"known: {', '.join(CONFIGS)}")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be at least 1 and --warmup at least 0")
    return args


def main(argv) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print(json.dumps({"skipped": "PyTorch is not installed"}))
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device visible to PyTorch"}))
        return 0

    device = torch.device(args.device)
    modes = CUDA_MODES if args.device == "cuda" else ("eager",)
    if args.device == "cpu":
        # The smoke test's model is too small to gain from more threads, and on a shared
        # machine more threads wait on each other (several times slower on two busy cores).
        torch.set_num_threads(1)
    results = []
    failed = False
    for name in args.configs:
        layers, width, heads, batch, sequence, vocab = CONFIGS[name]
        for mode in modes:
            row = {"config": name, "layers": layers, "width": width, "heads": heads,
                   "batch": batch, "sequence": sequence, "vocab": vocab,
                   "padded_vocab": padded(vocab), "mode": mode, "steps": args.steps,
                   "warmup": args.warmup}
            if args.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            try:
                row.update(run_mode(torch, name, mode, device, args.steps, args.warmup))
                losses = row["losses"] + [row["last_loss"]]
                if not all(math.isfinite(x) for x in losses):
                    raise FloatingPointError(f"a loss is not finite: {losses}")
            except Exception as error:  # recorded, and the other modes go on
                row["error"] = f"{type(error).__name__}: {error}"[:2000]
                failed = failed or mode != "compile_reduce_overhead"
            results.append(row)
            if args.device == "cuda":
                # The next mode starts with nothing of this one allocated, and without its
                # compiled code and CUDA graphs (a second shape would make torch.compile
                # recompile with dynamic shapes).
                gc.collect()
                if mode == "compile_reduce_overhead":
                    torch._dynamo.reset()
                torch.cuda.empty_cache()
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(json.dumps({"device": device_name, "torch": torch.__version__, "results": results},
                     indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
