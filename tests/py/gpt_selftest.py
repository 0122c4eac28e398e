"""Self-tests of the GPT mirror (python/seqtrain_torch/gpt.py), runnable without seqtrain's C++ GPT.

Usage: gpt_selftest.py [unittest options, e.g. -v or GptMirror.test_keys_and_shapes]
Called by tests/test_gpt_mirror.cpp (GptMirror.PythonSelfTest). Exit status 0 when every test
passes (unittest's convention: 1 otherwise).

The mirror is checked against an independent, deliberately plain implementation written here
(float64, loops over positions and heads for attention, LayerNorm / GELU / cross-entropy from
their formulas) for logits, loss and every gradient; and for: the tied head, the key list and
shapes with bias on and off, explicit attention = the loop = SDPA (torch 2.x), causality, the
init statistics, the save -> load round trip bit for bit (tied copies included), strict loading
refusing missing / mis-shaped / extra keys and differing tied copies, the optimizer groups,
generate, and loading a nanoGPT-style state_dict.
"""

import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from seqtrain_torch import GPT, GPTConfig, from_spec, load_seqtrain, read_file, save_seqtrain  # noqa: E402
from seqtrain_torch import save_file, tied_groups  # noqa: E402
from seqtrain_torch.gpt import CausalSelfAttention, gpt_param_shapes  # noqa: E402

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def expected_keys(V, T, L, C, bias):
    """The nanoGPT state_dict, written out by hand (independent of gpt_param_shapes)."""
    keys = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (T, C))]
    for i in range(L):
        h = f"transformer.h.{i}"
        keys.append((f"{h}.ln_1.weight", (C,)))
        if bias:
            keys.append((f"{h}.ln_1.bias", (C,)))
        keys.append((f"{h}.attn.c_attn.weight", (3 * C, C)))
        if bias:
            keys.append((f"{h}.attn.c_attn.bias", (3 * C,)))
        keys.append((f"{h}.attn.c_proj.weight", (C, C)))
        if bias:
            keys.append((f"{h}.attn.c_proj.bias", (C,)))
        keys.append((f"{h}.ln_2.weight", (C,)))
        if bias:
            keys.append((f"{h}.ln_2.bias", (C,)))
        keys.append((f"{h}.mlp.c_fc.weight", (4 * C, C)))
        if bias:
            keys.append((f"{h}.mlp.c_fc.bias", (4 * C,)))
        keys.append((f"{h}.mlp.c_proj.weight", (C, 4 * C)))
        if bias:
            keys.append((f"{h}.mlp.c_proj.bias", (C,)))
    keys.append(("transformer.ln_f.weight", (C,)))
    if bias:
        keys.append(("transformer.ln_f.bias", (C,)))
    keys.append(("lm_head.weight", (V, C)))
    return keys


# ---- the independent reference -------------------------------------------------------------

def ref_layernorm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)  # biased variance, as LayerNorm
    y = (x - mu) / torch.sqrt(var + 1e-5) * w
    return y + b if b is not None else y


def ref_gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def ref_linear(x, w, b):
    y = x @ w.t()
    return y + b if b is not None else y


def ref_attention_loop(qkv, n_head):
    """qkv [B, T, 3C] -> [B, T, C]: for every batch row, head and position t, softmax over s <= t."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    rows = []
    for b in range(B):
        steps = []
        for t in range(T):
            heads = []
            for j in range(n_head):
                q = qkv[b, t, j * hs:(j + 1) * hs]
                scores = torch.stack([(q * qkv[b, s, C + j * hs:C + (j + 1) * hs]).sum() / math.sqrt(hs)
                                      for s in range(t + 1)])
                e = torch.exp(scores - scores.max())
                w = e / e.sum()
                heads.append(sum(w[s] * qkv[b, s, 2 * C + j * hs:2 * C + (j + 1) * hs] for s in range(t + 1)))
            steps.append(torch.cat(heads))
        rows.append(torch.stack(steps))
    return torch.stack(rows)


def ref_forward(P, idx, targets, cfg):
    """P: name -> tensor (state_dict names; P['lm_head.weight'] is P['transformer.wte.weight'])."""
    g = lambda k: P.get(k)  # noqa: E731  (None for absent biases)
    B, T = idx.shape
    x = torch.stack([torch.stack([P["transformer.wte.weight"][idx[b, t]] + P["transformer.wpe.weight"][t]
                                  for t in range(T)]) for b in range(B)])
    for i in range(cfg.n_layer):
        h = f"transformer.h.{i}."
        a = ref_layernorm(x, g(h + "ln_1.weight"), g(h + "ln_1.bias"))
        a = ref_attention_loop(ref_linear(a, g(h + "attn.c_attn.weight"), g(h + "attn.c_attn.bias")), cfg.n_head)
        x = x + ref_linear(a, g(h + "attn.c_proj.weight"), g(h + "attn.c_proj.bias"))
        m = ref_layernorm(x, g(h + "ln_2.weight"), g(h + "ln_2.bias"))
        m = ref_gelu(ref_linear(m, g(h + "mlp.c_fc.weight"), g(h + "mlp.c_fc.bias")))
        x = x + ref_linear(m, g(h + "mlp.c_proj.weight"), g(h + "mlp.c_proj.bias"))
    x = ref_layernorm(x, g("transformer.ln_f.weight"), g("transformer.ln_f.bias"))
    logits = x @ P["lm_head.weight"].t()
    terms = []
    for b in range(B):
        for t in range(T):
            y = int(targets[b, t])
            if y == -1:
                continue
            z = logits[b, t]
            terms.append(z.max() + torch.log(torch.exp(z - z.max()).sum()) - z[y])
    return logits, torch.stack(terms).mean()


def randomize(model, seed, scale=0.3):
    """Larger-than-init random weights (LayerNorm weights around 1) so every path matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype) * scale
            p.copy_(r + 1.0 if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") or n.endswith("ln_f.weight")
                    else r)


def small(bias=True, n_head=2, n_layer=2, n_embd=12, vocab=11, block=7, dropout=0.0):
    return GPTConfig(block_size=block, vocab_size=vocab, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                     dropout=dropout, bias=bias)


def bits(t):
    return t.detach().contiguous().numpy().tobytes()


class GptMirror(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_keys_and_shapes(self):
        for bias in (True, False):
            cfg = small(bias=bias, n_layer=3)
            m = GPT(cfg)
            got = [(k, tuple(v.shape)) for k, v in m.state_dict().items()]
            want = expected_keys(cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_embd, bias)
            self.assertEqual(got, want, f"bias={bias}")
            self.assertEqual(gpt_param_shapes(cfg), want)
            self.assertFalse(any(k.endswith(".bias") for k, _ in got) and not bias)
            self.assertFalse(any("mask" in k or k.endswith(".attn.bias") for k, _ in got))
            self.assertEqual(len(list(m.buffers())), cfg.n_layer)  # the causal masks, none persistent
            self.assertEqual(got, [(k, tuple(v.shape)) for k, v in from_spec(
                {"type": "gpt", "vocab_size": cfg.vocab_size, "block_size": cfg.block_size, "n_layer": 3,
                 "n_head": 2, "n_embd": cfg.n_embd, "bias": bias}).state_dict().items()])

    def test_tied_head(self):
        m = GPT(small())
        self.assertIs(m.lm_head.weight, m.transformer.wte.weight)
        self.assertEqual(tied_groups(m), [["transformer.wte.weight", "lm_head.weight"]])
        names = [n for n, _ in m.named_parameters()]
        self.assertIn("transformer.wte.weight", names)
        self.assertNotIn("lm_head.weight", names)
        self.assertIsNone(m.lm_head.bias)
        sd = m.state_dict()
        self.assertEqual(bits(sd["transformer.wte.weight"]), bits(sd["lm_head.weight"]))
        with torch.no_grad():
            m.lm_head.weight[3, 4] = 7.0
        self.assertEqual(m.transformer.wte.weight[3, 4].item(), 7.0)
        d = m.double()
        self.assertIs(d.lm_head.weight, d.transformer.wte.weight)
        self.assertEqual(d.lm_head.weight.dtype, torch.float64)
        # get_num_params counts the tied tensor once
        self.assertEqual(m.get_num_params(False), sum(p.numel() for p in m.parameters()))
        self.assertEqual(m.get_num_params(False), sum(int(np.prod(s)) for k, s in gpt_param_shapes(m.config)
                                                      if k != "lm_head.weight"))

    def _check_against_reference(self, cfg, T, use_sdpa, ignore=False):
        m = GPT(cfg, use_sdpa=use_sdpa).double()
        randomize(m, seed=cfg.n_head * 10 + cfg.n_layer + int(cfg.bias))
        g = torch.Generator().manual_seed(5)
        idx = torch.randint(0, cfg.vocab_size, (2, T), generator=g)
        tgt = torch.randint(0, cfg.vocab_size, (2, T), generator=g)
        if ignore:
            tgt[0, 1] = -1
            tgt[1, T - 1] = -1
        logits, loss = m(idx, tgt)
        loss.backward()

        P = {k: v.detach().clone().requires_grad_(True) for k, v in m.state_dict().items() if k != "lm_head.weight"}
        P["lm_head.weight"] = P["transformer.wte.weight"]  # the tie: one leaf, gradients summed
        rl, rloss = ref_forward(P, idx, tgt, cfg)
        rloss.backward()
        self.assertEqual(tuple(logits.shape), (2, T, cfg.vocab_size))
        self.assertTrue(torch.allclose(logits, rl, rtol=0, atol=1e-11), (logits - rl).abs().max().item())
        self.assertAlmostEqual(loss.item(), rloss.item(), delta=1e-12)
        self.assertAlmostEqual(loss.item(), F.cross_entropy(rl.reshape(-1, cfg.vocab_size), tgt.reshape(-1),
                                                            ignore_index=-1).item(), delta=1e-12)
        for n, p in m.named_parameters():
            r = P[n].grad
            scale = max(1e-30, r.abs().max().item())
            self.assertLess((p.grad - r).abs().max().item() / scale, 1e-9, n)

    def test_matches_plain_reference(self):
        for bias in (True, False):
            for n_head, n_layer in ((1, 1), (3, 2)):
                cfg = small(bias=bias, n_head=n_head, n_layer=n_layer)
                for use_sdpa in ([False, True] if HAS_SDPA else [False]):
                    with self.subTest(bias=bias, n_head=n_head, n_layer=n_layer, use_sdpa=use_sdpa):
                        self._check_against_reference(cfg, T=cfg.block_size, use_sdpa=use_sdpa)
        with self.subTest("T < block_size, ignore_index -1"):
            self._check_against_reference(small(n_head=2), T=4, use_sdpa=False, ignore=True)

    def test_float32_close_to_float64_reference(self):
        cfg = small(n_head=3)
        m = GPT(cfg)
        randomize(m, 9)
        idx = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
        logits, loss = m(idx, idx)
        P = {k: v.detach().double() for k, v in m.state_dict().items()}
        rl, rloss = ref_forward(P, idx, idx, cfg)
        self.assertLess((logits.double() - rl).abs().max().item() / rl.abs().max().item(), 1e-5)
        self.assertLess(abs(loss.item() - rloss.item()) / rloss.item(), 1e-5)

    def test_explicit_attention_equals_loop(self):
        for C, H in ((12, 1), (12, 3), (16, 4)):
            cfg = small(n_embd=C, n_head=H, block=9)
            attn = CausalSelfAttention(cfg, use_sdpa=False).double()
            randomize(attn, C + H, scale=0.5)
            x = torch.randn(3, 6, C, dtype=torch.float64)
            y = attn(x)
            qkv = attn.c_attn(x)
            want = attn.c_proj(ref_attention_loop(qkv, H))
            self.assertTrue(torch.allclose(y, want, rtol=0, atol=1e-12), (C, H))
            if HAS_SDPA:
                attn.use_sdpa = True
                self.assertTrue(torch.allclose(attn(x), want, rtol=0, atol=1e-12), (C, H, "sdpa"))

    def test_causal(self):
        cfg = small()
        m = GPT(cfg).eval()
        randomize(m, 3)
        idx = torch.randint(0, cfg.vocab_size, (1, cfg.block_size))
        a, _ = m(idx)
        idx2 = idx.clone()
        idx2[0, 4] = (idx2[0, 4] + 1) % cfg.vocab_size
        b, _ = m(idx2)
        self.assertTrue(torch.equal(a[:, :4], b[:, :4]))
        self.assertFalse(torch.allclose(a[:, 4:], b[:, 4:]))
        with self.assertRaises(ValueError):
            m(torch.zeros(1, cfg.block_size + 1, dtype=torch.long))

    def test_init_statistics(self):
        L = 4
        cfg = GPTConfig(block_size=64, vocab_size=300, n_layer=L, n_head=4, n_embd=128, bias=True)
        torch.manual_seed(1)
        m = GPT(cfg)
        proj_std = 0.02 / math.sqrt(2 * L)
        for n, p in m.state_dict().items():
            p = p.double()
            if n.endswith(".bias"):
                self.assertTrue(torch.all(p == 0), n)
            elif ".ln_" in n or n.startswith("transformer.ln_f"):
                self.assertTrue(torch.all(p == 1), n)
            else:
                want = proj_std if n.endswith("c_proj.weight") else 0.02
                self.assertLess(abs(p.std().item() / want - 1), 0.05, n)
                self.assertLess(abs(p.mean().item()), 5 * want / math.sqrt(p.numel()), n)
                self.assertLess(p.abs().max().item(), 7 * want, n)  # normal, not uniform or truncated oddly

    def test_save_load_round_trip_bit_exact(self):
        for bias in (True, False):
            cfg = small(bias=bias)
            torch.manual_seed(2)
            a = GPT(cfg)
            randomize(a, 4)
            with tempfile.TemporaryDirectory() as d:
                p1, p2 = os.path.join(d, "a.safetensors"), os.path.join(d, "b.safetensors")
                save_seqtrain(a, p1, metadata={"k": "v"})
                arrays, meta = read_file(p1)
                self.assertEqual(meta, {"k": "v"})
                self.assertEqual(list(arrays), list(a.state_dict()))
                self.assertEqual(arrays["transformer.wte.weight"].tobytes(), arrays["lm_head.weight"].tobytes())
                torch.manual_seed(3)
                b = GPT(cfg)
                self.assertEqual(load_seqtrain(p1, b), {"k": "v"})
                self.assertIs(b.lm_head.weight, b.transformer.wte.weight)
                for k, v in a.state_dict().items():
                    self.assertEqual(bits(v), bits(b.state_dict()[k]), k)
                    self.assertEqual(bits(v), arrays[k].tobytes(), k)
                save_seqtrain(b, p2, metadata={"k": "v"})
                with open(p1, "rb") as f1, open(p2, "rb") as f2:
                    self.assertEqual(f1.read(), f2.read())

    def _refused(self, cfg, arrays, what):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.safetensors")
            save_file(arrays, p)
            with self.assertRaises(RuntimeError, msg=what) as cm:
                load_seqtrain(p, GPT(cfg))
            return str(cm.exception)

    def test_strict_loading_refuses(self):
        cfg = small()
        good = {k: v.numpy().copy() for k, v in GPT(cfg).state_dict().items()}

        def variant(fn):
            a = {k: v.copy() for k, v in good.items()}
            fn(a)
            return a

        msg = self._refused(cfg, variant(lambda a: a.pop("transformer.h.1.ln_2.bias")), "missing key")
        self.assertIn("transformer.h.1.ln_2.bias", msg)
        msg = self._refused(cfg, variant(lambda a: a.update({"transformer.wpe.weight": np.zeros(
            (cfg.block_size + 1, cfg.n_embd), np.float32)})), "mis-shaped key")
        self.assertIn("transformer.wpe.weight", msg)
        msg = self._refused(cfg, variant(lambda a: a.update({"transformer.h.0.attn.c_attn.weight": np.zeros(
            (3 * cfg.n_embd, cfg.n_embd + 1), np.float32)})), "mis-shaped 2-D key")
        self.assertIn("c_attn.weight", msg)
        msg = self._refused(cfg, variant(lambda a: a.pop("lm_head.weight")), "missing tied alias")
        self.assertIn("lm_head.weight", msg)
        msg = self._refused(cfg, variant(lambda a: a.update({"transformer.h.0.attn.bias": np.ones(
            (1, 1, cfg.block_size, cfg.block_size), np.float32)})), "extra key (nanoGPT's mask buffer)")
        self.assertIn("transformer.h.0.attn.bias", msg)

        def differ(a):
            a["lm_head.weight"][0, 0] += 1.0
        msg = self._refused(cfg, variant(differ), "tied copies differ")
        self.assertIn("tied", msg)
        # bias-free weights into a bias model and the other way round
        self._refused(small(bias=False), good, "bias file into bias=False")
        self._refused(cfg, {k: v.numpy() for k, v in GPT(small(bias=False)).state_dict().items()},
                      "bias-free file into bias=True")

    def test_optimizer_groups(self):
        m = GPT(small(n_layer=2))
        decay, no_decay = m.optim_group_names()
        self.assertEqual(sorted(decay), sorted(
            ["transformer.wte.weight", "transformer.wpe.weight"] +
            [f"transformer.h.{i}.{s}.weight" for i in range(2) for s in ("attn.c_attn", "attn.c_proj",
                                                                          "mlp.c_fc", "mlp.c_proj")]))
        self.assertEqual(sorted(no_decay), sorted(
            [k for k, _ in gpt_param_shapes(m.config) if k.endswith(".bias") or ".ln_" in k or "ln_f" in k]))
        groups = m.optim_groups(0.1)
        self.assertEqual([g["weight_decay"] for g in groups], [0.1, 0.0])
        ids = [id(p) for g in groups for p in g["params"]]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertEqual(set(ids), {id(p) for p in m.parameters()})
        opt = m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
        self.assertIsInstance(opt, torch.optim.AdamW)
        self.assertEqual(opt.param_groups[0]["betas"], (0.9, 0.99))
        # one AdamW step applies decay to 2-D tensors only: with zero gradients, lr*wd*p moves
        with torch.no_grad():
            before = {n: p.clone() for n, p in m.named_parameters()}
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        for n, p in m.named_parameters():
            moved = not torch.equal(p, before[n])
            self.assertEqual(moved, n in decay and bool(before[n].abs().max() > 0), n)

    def test_generate(self):
        cfg = small()
        m = GPT(cfg).eval()
        randomize(m, 6)
        idx = torch.randint(0, cfg.vocab_size, (2, 3))
        out = m.generate(idx, 10, temperature=0)  # runs past block_size: the context is cropped
        self.assertEqual(tuple(out.shape), (2, 13))
        self.assertTrue(torch.equal(out[:, :3], idx))
        # greedy, recomputed by hand with the cropped context
        seq = idx.clone()
        for _ in range(10):
            logits, _ = m(seq[:, -cfg.block_size:])
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], 1)
        self.assertTrue(torch.equal(out, seq))
        g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
        self.assertTrue(torch.equal(m.generate(idx, 5, 1.0, top_k=1, generator=g1), out[:, :8]))
        s1 = m.generate(idx, 6, 0.8, top_k=3, generator=g2)
        s2 = m.generate(idx, 6, 0.8, top_k=3, generator=torch.Generator().manual_seed(7))
        self.assertTrue(torch.equal(s1, s2))
        self.assertTrue(((s1 >= 0) & (s1 < cfg.vocab_size)).all())

    def test_dropout_only_in_training(self):
        cfg = small(dropout=0.5)
        m = GPT(cfg)
        idx = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
        m.eval()
        self.assertTrue(torch.equal(m(idx)[0], m(idx)[0]))
        m.train()
        self.assertFalse(torch.equal(m(idx)[0], m(idx)[0]))

    def test_load_nanogpt_state_dict(self):
        cfg = small()
        a = GPT(cfg)
        randomize(a, 8)
        sd = {"_orig_mod." + k: v.clone() for k, v in a.state_dict().items()}
        for i in range(cfg.n_layer):  # what nanoGPT saves under torch < 2: the causal mask buffers
            sd[f"_orig_mod.transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(cfg.block_size, cfg.block_size)) \
                .view(1, 1, cfg.block_size, cfg.block_size)
        b = GPT(cfg)
        b.load_nanogpt_state_dict(sd)
        for k, v in a.state_dict().items():
            self.assertTrue(torch.equal(v, b.state_dict()[k]), k)
        self.assertIs(b.lm_head.weight, b.transformer.wte.weight)

    def test_config_validation(self):
        with self.assertRaises(ValueError):
            GPTConfig(n_embd=10, n_head=3)
        with self.assertRaises(ValueError):
            GPTConfig(n_layer=0)


if __name__ == "__main__":
    print(f"torch {torch.__version__}, numpy {np.__version__}, scaled_dot_product_attention: {HAS_SDPA}",
          file=sys.stderr)
    unittest.main()
