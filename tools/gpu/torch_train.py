#!/usr/bin/env python3
"""PyTorch's eager training loop of the models that bench/train_throughput --device=gpu measures.

--model=mlp: MLP 4096-8192-8192-10 (ReLU), global batch 4096. --model=transformer: the bench
Transformer (bench/transformer_spec.h): 2 pre-norm blocks of layer norm, 4-head causal
self-attention, residual add, layer norm, dense 4d, GELU, dense d, residual add, over
[128, 256] float inputs; global average pooling and a dense classifier of 10; global batch 256.
Softmax cross-entropy, SGD with momentum 0.9, on GPU 0, synthetic data, in two configurations:
f32 with TF32 off, and bf16 autocast (f32 weights, bf16 products, as our BF16_MIXED); and two
feeds: "device", one batch made on the GPU and reused by every step (the fastest a loop can
be fed), and "host", a host batch per step copied in as a pinned-memory loader does
(DataLoader(pin_memory=True): page-locked host batches, .to("cuda", non_blocking=True)), as
Lockstep's input pipeline feeds its steps. For each, --warmup steps, then --steps timed ones
(torch.cuda.synchronize before and after), and prints one JSON line: examples/s, step ms,
torch.cuda.max_memory_allocated over the loop, and (MLP) the cuBLAS time of that step's
products alone (torch.matmul of the same shapes, operand layouts and precision, each timed
with CUDA events; once per precision): the bound a step can approach. The MLP's products of
one step, with W of shape [in, out]: forward x.W for each layer; weight gradients x^T.dy
(x transposed); input gradients dy.W^T (W transposed) of the two upper layers (the batch
needs none): 8 GEMMs, each printed with its milliseconds under "gemms".

  python3 tools/gpu/torch_train.py [--model=mlp] [--configs=f32,bf16] [--feeds=device,host]
      [--steps=30] [--warmup=5]

Exit status 0 when every configuration ran; 1 when one failed (its line says why); 3 when
torch or a CUDA GPU is missing.
"""

import argparse
import json
import sys
import time

LAYERS = [4096, 8192, 8192, 10]
# The bench Transformer (bench/transformer_spec.h with vocab 0: float inputs).
SEQ, WIDTH, HEADS, BLOCKS, CLASSES = 128, 256, 4, 2, 10
DEFAULT_BATCH = {"mlp": 4096, "transformer": 256}
GEMMS = {}  # config -> {product: ms}, measured once per precision


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="f32,bf16", help="f32 (TF32 off) and/or bf16 (autocast)")
    p.add_argument("--model", default="mlp", choices=sorted(DEFAULT_BATCH))
    p.add_argument("--feeds", default="device,host",
                   help="device (one batch on the GPU, reused) and/or host (pinned, per step)")
    p.add_argument("--batch", type=int, default=0, help="global batch (0: the model's)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--gemm_iters", type=int, default=20, help="timed runs of each product")
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args(argv)
    a.configs = [c for c in a.configs.split(",") if c]
    a.feeds = [f for f in a.feeds.split(",") if f]
    if a.batch == 0:
        a.batch = DEFAULT_BATCH[a.model]
    if not a.feeds or [f for f in a.feeds if f not in ("device", "host")]:
        p.error("want --feeds from device,host (got %s)" % ",".join(a.feeds))
    bad = [c for c in a.configs if c not in ("f32", "bf16")]
    if bad or not a.configs or a.batch < 1 or a.warmup < 0 or a.steps < 1 or a.gemm_iters < 1:
        p.error("want --configs from f32,bf16 (got %s), --batch >= 1, --warmup >= 0, --steps >= 1"
                % ",".join(a.configs))
    return a


def gemm_shapes(batch):
    """Each product of one training step: (name, m, k, n, a_transposed, b_transposed), the
    product of an m x k and a k x n operand, a transposed one stored as its transpose (a view,
    as the step's backward pass hands it to cuBLAS)."""
    shapes = []
    layers = list(zip(LAYERS[:-1], LAYERS[1:]))
    for i, (fan_in, fan_out) in enumerate(layers, 1):
        shapes.append(("fwd%d" % i, batch, fan_in, fan_out, False, False))  # x . W
    for i, (fan_in, fan_out) in reversed(list(enumerate(layers, 1))):
        shapes.append(("dW%d" % i, fan_in, batch, fan_out, True, False))  # x^T . dy
        if i > 1:
            shapes.append(("dx%d" % i, batch, fan_out, fan_in, False, True))  # dy . W^T
    return shapes


def gemm_ms(torch, batch, dtype, iters):
    """Milliseconds of each of one step's products, each timed alone with CUDA events:
    {name: ms}."""
    out = {}
    for name, m, k, n, a_t, b_t in gemm_shapes(batch):
        a = torch.randn(k, m, device="cuda", dtype=dtype).t() if a_t else \
            torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(n, k, device="cuda", dtype=dtype).t() if b_t else \
            torch.randn(k, n, device="cuda", dtype=dtype)
        for _ in range(3):
            torch.matmul(a, b)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            torch.matmul(a, b)
        end.record()
        end.synchronize()
        out[name] = start.elapsed_time(end) / iters
        del a, b
    torch.cuda.empty_cache()
    return out


def transformer(torch):
    """The bench Transformer: pre-norm causal blocks, average pooling, a classifier."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(WIDTH)
            self.att = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
            self.ln2 = nn.LayerNorm(WIDTH)
            self.ff = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(),
                                    nn.Linear(4 * WIDTH, WIDTH))
            self.register_buffer(
                "mask", torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), diagonal=1))

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.att(h, h, h, attn_mask=self.mask, need_weights=False)[0]
            return x + self.ff(self.ln2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*[Block() for _ in range(BLOCKS)])
            self.logits = nn.Linear(WIDTH, CLASSES)

        def forward(self, x):
            return self.logits(self.blocks(x).mean(dim=1))

    return Model()


def model_and_shapes(torch, a):
    """The model, one example's feature shape, and the number of classes."""
    if a.model == "transformer":
        return transformer(torch), (SEQ, WIDTH), CLASSES
    nn = torch.nn
    layers = []
    for fan_in, fan_out in zip(LAYERS[:-1], LAYERS[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1]), (LAYERS[0],), LAYERS[-1]


def run_config(torch, a, config, feed):
    nn = torch.nn
    # f32 products in full precision (no TF32); the API that every torch 2.x keeps.
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(1)
    model, shape, classes = model_and_shapes(torch, a)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    if feed == "device":
        batches = [(torch.randn(a.batch, *shape, device="cuda"),
                    torch.randint(0, classes, (a.batch,), device="cuda"))]
    else:  # two page-locked host batches, alternated: a pinned loader's ring
        batches = [(torch.randn(a.batch, *shape).pin_memory(),
                    torch.randint(0, classes, (a.batch,)).pin_memory()) for _ in range(2)]
    steps_made = [0]

    def step():
        x, y = batches[steps_made[0] % len(batches)]
        steps_made[0] += 1
        if feed == "host":
            x = x.to("cuda", non_blocking=True)
            y = y.to("cuda", non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(config == "bf16")):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    first = step().item()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps
    peak = torch.cuda.max_memory_allocated()
    last = loss.item()
    del model, opt, batches, loss
    torch.cuda.empty_cache()
    gemms = None
    if a.model == "mlp":  # once per precision: the feeds share their products
        if config not in GEMMS:
            GEMMS[config] = gemm_ms(torch, a.batch,
                                    torch.float32 if config == "f32" else torch.bfloat16,
                                    a.gemm_iters)
        gemms = GEMMS[config]
    products = sum(gemms.values()) if gemms else None
    step_ms = seconds * 1e3
    return {
        "config": config,
        "feed": feed,
        "model": ("mlp " + "-".join(str(n) for n in LAYERS) if a.model == "mlp" else
                  "transformer %dx(seq %d, width %d, %d heads, causal)" % (BLOCKS, SEQ, WIDTH,
                                                                          HEADS)),
        "batch": a.batch,
        "steps": a.steps,
        "examples_per_s": round(a.batch / seconds, 1),
        "step_ms": round(step_ms, 3),
        "gemm_ms": round(products, 3) if products else None,
        "step_over_gemm": round(step_ms / products, 3) if products else None,
        "gemms": {k: round(v, 3) for k, v in gemms.items()} if gemms else None,
        "max_memory_allocated_bytes": peak,
        "loss_first": round(first, 5),
        "loss_last": round(last, 5),
        "f32_matmul_precision": torch.get_float32_matmul_precision(),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
    }


def main(argv):
    a = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print("torch_train: torch is not installed for %s (%s)" % (sys.executable, e),
              file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_train: torch %s sees no CUDA GPU (check the driver and "
              "CUDA_VISIBLE_DEVICES)" % torch.__version__, file=sys.stderr)
        return 3
    rc = 0
    for config in a.configs:
        for feed in a.feeds:
            try:
                line = run_config(torch, a, config, feed)
            except Exception as e:  # one failed configuration does not stop the next
                line = {"config": config, "feed": feed, "error": "%s: %s" % (type(e).__name__, e)}
                rc = 1
                torch.cuda.empty_cache()
            print(json.dumps(line))
            sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
