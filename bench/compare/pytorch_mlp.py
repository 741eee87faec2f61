#!/usr/bin/env python3
"""The design's MLP training step in PyTorch, eager and captured with torch.cuda.graph, timed
the way graphstep_bench times its own (CUDA events, warm-up, median of steps), for the same
batch sizes. Prints JSON; when PyTorch or a GPU is missing it says so in the JSON and exits 0."""

import json
import statistics
import sys


def main() -> int:
    try:
        import torch
    except ImportError:
        print(json.dumps({"skipped": "PyTorch is not installed"}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device visible to PyTorch"}))
        return 0

    torch.manual_seed(2024)
    device = torch.device("cuda")
    results = []
    for batch in (1, 8, 64, 640):
        for mode in ("eager", "graphed"):
            model = torch.nn.Sequential(
                torch.nn.Linear(4096, 2048), torch.nn.GELU(approximate="tanh"),
                torch.nn.Dropout(0.2), torch.nn.Linear(2048, 1024), torch.nn.Dropout(0.1),
            ).to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loss_fn = torch.nn.MSELoss()
            x = torch.randn(batch, 4096, device=device)
            y = torch.randn(batch, 1024, device=device)

            def step():
                optimizer.zero_grad(set_to_none=False)
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()

            # Warm-up on a side stream, as torch.cuda.graph's documentation asks.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(5):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            run = step
            if mode == "graphed":
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    step()
                run = graph.replay
            times = []
            for _ in range(5):
                run()
            for _ in range(50):
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) * 1e3)
            results.append({"mode": mode, "batch": batch,
                            "median_us": statistics.median(times)})
    print(json.dumps({"torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0),
                      "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
