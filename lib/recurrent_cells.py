"""LRU, LSTM and GRU beside the gated RNN (Zucchet et al. 2023, App. A, Table 3, Fig. 4).

* :class:`LRULayer` -- the linear recurrent unit of Orvieto et al. (2023), eqs. (6)-(9):
  complex diagonal recurrence h_t = lam * h_{t-1} + gamma * (B u_t), lam = exp(-exp(nu) +
  i exp(theta)), gamma = exp(gamma_log); output y~_t = Re(C h_t) + D * u_t and a GLU
  y_t = sigmoid(W_m y~_t) * (W_x y~_t).  ``input_gate=True`` adds the GLU on the input
  (the paper's "LRU In+Out"); ``skip_gate=True`` with it feeds the layer's input u_t instead of
  y~_t to the GLU's sigmoid branch (the paper's "LRU In+Skip", App. A.1).
* :class:`RecurrentNet` -- embedding, 1-2 recurrent layers (LSTM / GRU / LRU / LRU In+Out / In+Skip,
  torch.nn.LSTM and torch.nn.GRU for the first two), linear readout: the architectures of Fig. 4.
* :func:`lstm_from_attention` -- one torch.nn.LSTM layer plus a readout that implements a linear
  self-attention layer (Table 4, left) with every sigmoid and tanh linearised at scale s; the
  error is O(s^2).
* :func:`glu_gating` -- the linear gating (W_m x) * (W_x x) as a difference of two GLUs with
  small weights (App. A.1), error O(eps^2).
* :func:`lru_from_gated` -- two :class:`LRULayer` (GLU output) and a readout that implement a
  gated RNN of eq. (2) to O(eps^2) (Table 3: "LRU, 2 layers").
* :func:`lru_in_from_attention` -- one LRU In+Out or In+Skip layer and a readout that implement
  a linear self-attention layer to O(eps^2) (Table 3: one layer each).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import as_tensor, finite, finite_output, float_dtype, positive_int, positive_real, seed_int
from .diagonal import recurrence_unchecked
from .gated import GatedLinearRNN

__all__ = ["LRULayer", "RecurrentNet", "ModuleStack", "lstm_from_attention", "glu_gating", "lru_from_gated",
           "lru_in_from_attention", "RECURRENT_KINDS"]

RECURRENT_KINDS = ("lstm", "gru", "lru", "lru_in_out", "lru_in_skip")


class LRULayer(nn.Module):
    """One LRU layer with GLU output (and optional GLU input).  (B, T, width) -> (B, T, width).

    Used in Chapter 13: sections "sec-glu" and "sec-lru-in" set its weights by hand (App. A.1),
    section "sec-fig4" trains it.

    Args:
        width: input/output dimension; n_state: complex hidden units (default ``width``).
        input_gate: add the input GLU (LRU In+Out).
        skip_gate: the output GLU's sigmoid branch reads the layer input u_t instead of y~_t
            (LRU In+Skip; needs ``input_gate``).
        r_min, r_max, max_phase: ring initialisation of lam (Orvieto et al. 2023).
    """

    def __init__(self, width: int, n_state: int | None = None, *, input_gate: bool = False,
                 skip_gate: bool = False, r_min: float = 0.0, r_max: float = 0.99, max_phase: float = math.pi,
                 seed: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        width = positive_int("width", width)
        n_state = width if n_state is None else positive_int("n_state", n_state)
        if skip_gate and not input_gate:
            raise ValueError("skip_gate=True needs input_gate=True (the LRU In+Skip layer)")
        if not 0.0 <= r_min < r_max < 1.0:
            raise ValueError(f"need 0 <= r_min < r_max < 1, got r_min={r_min}, r_max={r_max}")
        dtype = float_dtype("dtype", dtype)
        g = torch.Generator().manual_seed(seed_int("seed", seed))
        f64 = torch.float64
        u1 = torch.rand(n_state, generator=g, dtype=f64)
        u2 = torch.rand(n_state, generator=g, dtype=f64)
        nu = -0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2)
        theta = (max_phase * u2).clamp_min(1e-6)
        lam_abs = torch.exp(-nu)
        self.nu_log = nn.Parameter(torch.log(nu).to(dtype))
        self.theta_log = nn.Parameter(torch.log(theta).to(dtype))
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - lam_abs**2)).to(dtype))

        def gauss(rows, cols, var):
            return (torch.randn(rows, cols, generator=g, dtype=f64) * math.sqrt(var)).to(dtype)

        self.B_re = nn.Parameter(gauss(n_state, width, 1 / (2 * width)))
        self.B_im = nn.Parameter(gauss(n_state, width, 1 / (2 * width)))
        self.C_re = nn.Parameter(gauss(width, n_state, 1 / n_state))
        self.C_im = nn.Parameter(gauss(width, n_state, 1 / n_state))
        self.D_skip = nn.Parameter(torch.randn(width, generator=g, dtype=f64).to(dtype))
        self.W_m = nn.Parameter(gauss(width, width, 1 / width))
        self.W_x = nn.Parameter(gauss(width, width, 1 / width))
        self.input_gate = bool(input_gate)
        self.skip_gate = bool(skip_gate)
        if input_gate:
            self.Wi_m = nn.Parameter(gauss(width, width, 1 / width))
            self.Wi_x = nn.Parameter(gauss(width, width, 1 / width))

    @property
    def lam(self) -> torch.Tensor:
        return torch.exp(torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, width) -> (B, T, width); x is checked first (a tensor with data of the layer's
        dtype, 3-D, of the layer's width, finite)."""
        x = as_tensor("x", x, 3, dtype=self.W_x.dtype)
        if x.shape[-1] != self.W_x.shape[1]:
            raise ValueError(f"x must be (B, T, width = {self.W_x.shape[1]}), got {tuple(x.shape)}")
        if x.device != self.W_x.device:
            raise TypeError(f"x is on {x.device} but the layer's parameters are on {self.W_x.device}")
        return self.forward_unchecked(x)

    def forward_unchecked(self, x: torch.Tensor) -> torch.Tensor:
        """The layer without input checks (inside :class:`RecurrentNet`, whose input is checked)."""
        u = x
        if self.input_gate:
            x = torch.sigmoid(x @ self.Wi_m.T) * (x @ self.Wi_x.T)
        Bu = torch.complex(x @ self.B_re.T, x @ self.B_im.T) * torch.exp(self.gamma_log)
        h = recurrence_unchecked(self.lam, Bu)
        y = h.real @ self.C_re.T - h.imag @ self.C_im.T + self.D_skip * x
        return torch.sigmoid((u if self.skip_gate else y) @ self.W_m.T) * (y @ self.W_x.T)


class RecurrentNet(nn.Module):
    """Linear embedding -> ``layers`` recurrent layers of ``kind`` -> linear readout (Fig. 4).

    kind: "lstm" | "gru" (torch.nn.LSTM / torch.nn.GRU), "lru" (GLU output only),
    "lru_in_out" (GLU on input and output) or "lru_in_skip" (input GLU; the output GLU's
    sigmoid branch reads the layer input).  (B, T, d_in) -> (B, T, d_out).

    The initial weights are a function of ``seed`` alone: torch's ``nn.Linear`` / ``nn.LSTM`` /
    ``nn.GRU`` initialisers draw from the global CPU generator, so the construction runs inside
    ``torch.random.fork_rng`` with that generator seeded by ``seed``; the caller's global random
    state is left as it was.  Chapter 13 (section "Fig. 4: which architectures learn
    attention?") trains these networks.
    """

    def __init__(self, kind: str, d_in: int, width: int, d_out: int, layers: int = 1, *,
                 seed: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        if kind not in RECURRENT_KINDS:
            raise ValueError(f"kind must be one of {RECURRENT_KINDS}, got {kind!r}")
        d_in, width, d_out = (positive_int(n, v) for n, v in (("d_in", d_in), ("width", width), ("d_out", d_out)))
        layers = positive_int("layers", layers)
        seed = seed_int("seed", seed)
        dtype = float_dtype("dtype", dtype)
        self.kind, self.layers, self.width = kind, layers, width
        self.d_in, self.d_out = d_in, d_out
        # nn.Linear / nn.LSTM initialisers draw from the global CPU generator: seed it for the
        # construction only, and give the caller's global state back afterwards
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(seed)
            self.embed = nn.Linear(d_in, width, dtype=dtype)
            if kind == "lstm":
                self.core = nn.LSTM(width, width, num_layers=layers, batch_first=True, dtype=dtype)
            elif kind == "gru":
                self.core = nn.GRU(width, width, num_layers=layers, batch_first=True, dtype=dtype)
            else:
                self.core = nn.Sequential(*[LRULayer(width, input_gate=kind in ("lru_in_out", "lru_in_skip"),
                                                     skip_gate=kind == "lru_in_skip",
                                                     seed=seed * 100 + k, dtype=dtype)
                                            for k in range(layers)])
            self.readout = nn.Linear(width, d_out, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d_in) -> (B, T, d_out); x is checked (shape, dtype and device, finite) first, and
        the output after (a non-finite output names the non-finite parameter)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.embed.in_features \
                or x.numel() == 0:
            raise ValueError(f"x must be a tensor (B, T, d_in = {self.embed.in_features}) with B, T >= 1, got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        w = self.embed.weight
        if x.dtype != w.dtype or x.device != w.device:
            raise TypeError(f"x is {x.dtype} on {x.device} but the network's parameters are {w.dtype} on {w.device}")
        finite("x", x)
        return finite_output(self.forward_unchecked(x), x, self)

    def forward_unchecked(self, x: torch.Tensor) -> torch.Tensor:
        """The forward without input checks (the training step's inner call: no host sync)."""
        z = self.embed(x)
        if self.kind in ("lstm", "gru"):
            z = self.core(z)[0]
        else:
            for layer in self.core:
                z = layer.forward_unchecked(z)
        return self.readout(z)


def lstm_from_attention(W_V, W_K, W_Q, scale: float, forget_bias: float = 50.0):
    """One LSTM layer + readout R implementing linear self-attention to O(scale^2) (Table 4, left).

    Derived in Chapter 13, section "sec-lstm".

    Unit (i, j, a, b), a, b in {1, 0}: input gate sigmoid(s a v_i) (the paper's g, on the
    values), candidate tanh(s k_j) (the paper's c~, on the keys), forget gate sigmoid(50) = 1
    (b_f = +inf), output gate sigmoid(s b q_j) (queries).  With sigmoid(z) = 1/2 + z/4 + O(z^3)
    and tanh(z) = z + O(z^3), the combination h(1,1) - h(0,1) - h(1,0) + h(0,0) equals
    (s^3/16) (sum_t v_i k_j) q_j (1 + O(s^2)), so R = 16/s^3 times the signed sums over j.
    Returns ``(lstm, R)`` (float64): y = lstm(x)[0] @ R.T approximates LSA(x), x (B, T, d).
    """
    from .attention import check_attention_weights

    W_V, W_K, W_Q = check_attention_weights(W_V, W_K, W_Q)
    W_V, W_K, W_Q = W_V.double(), W_K.double(), W_Q.double()
    s = positive_real("scale", scale)
    d_v, d = W_V.shape
    d_k = W_K.shape[0]
    units = [(i, j, a, b) for i in range(d_v) for j in range(d_k) for a in (1, 0) for b in (1, 0)]
    H = len(units)
    lstm = nn.LSTM(d, H, batch_first=True, dtype=torch.float64)
    W_ih = torch.zeros(4 * H, d, dtype=torch.float64)         # gate order: i, f, g, o
    b = torch.zeros(4 * H, dtype=torch.float64)
    R = torch.zeros(d_v, H, dtype=torch.float64)
    for u, (i, j, a, bb) in enumerate(units):
        W_ih[u] = s * a * W_V[i]                 # input gate  <- values
        b[H + u] = forget_bias                   # forget gate = 1
        W_ih[2 * H + u] = s * W_K[j]             # candidate   <- keys
        W_ih[3 * H + u] = s * bb * W_Q[j]        # output gate <- queries
        R[i, u] = (16.0 / s**3) * (1 if a == bb else -1)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(W_ih)
        lstm.weight_hh_l0.zero_()
        lstm.bias_ih_l0.copy_(b)
        lstm.bias_hh_l0.zero_()
    return lstm, R


def glu_gating(W_m, W_x, eps: float):
    """Linear gating (W_m x) * (W_x x) from two GLUs with small weights (App. A.1).

    Derived in Chapter 13, section "sec-glu".

    sigmoid(eps W_m x) * (W_x x) - sigmoid(0) * (W_x x) = (eps/4)(W_m x)(W_x x) (1 + O(eps^2)),
    so ``f(x) = (4/eps) [GLU_1(x) - GLU_2(x)]`` with GLU_1 = (eps W_m, W_x), GLU_2 = (0, W_x).
    Returns the function f: (..., d) -> (..., n).
    """
    W_m = as_tensor("W_m", W_m, 2)
    W_x = as_tensor("W_x", W_x, 2, dtype=W_m.dtype)
    if W_m.shape != W_x.shape:
        raise ValueError(f"W_m and W_x must have the same shape, got {tuple(W_m.shape)}, {tuple(W_x.shape)}")
    eps = positive_real("eps", eps)

    def f(x):
        wx = x @ W_x.T
        return (4.0 / eps) * (torch.sigmoid(eps * (x @ W_m.T)) * wx - 0.5 * wx)

    return f


def lru_from_gated(model, eps: float):
    """Two LRU layers (GLU output) + readout R implementing the gated RNN ``model`` to O(eps^2).

    Derived in Chapter 13, section "sec-glu".

    Width W = max(d_x, 2|h|, 2 n_gate), inputs x~ = (x, 1) zero-padded to W.  Layer 1 has
    lam = 0, B = C = I, no skip, so its GLU sees x~_t; its first |h| GLU units compute
    sigmoid(eps W_in_m x~) * (W_in_x x~), the next |h| sigmoid(0) * (W_in_x x~) (App. A.1).
    Layer 2's B = (4/eps)[I, -I] takes their difference, i.e. g_in(x~_t) (1 + O(eps^2)), and
    its diagonal recurrence has the model's lam (real: phase 0); its GLU does the same for
    g_out with (W_out_m, W_out_x), and R = (4/eps)[D, -D].  Returns ``(layers, R)`` (float64):
    y = layers(x~ padded) @ R.T approximates model(x).  lam = 1 and 0 are represented as
    exp(-exp(-50)) and exp(-exp(50)), which are 1 and 0 in float64.
    """
    if not isinstance(model, GatedLinearRNN):
        raise TypeError("model must be a lib.GatedLinearRNN")
    eps = positive_real("eps", eps)
    f64 = torch.float64
    A, Bx = model.W_in_m.detach().double(), model.W_in_x.detach().double()
    Om, Ox, D = model.W_out_m.detach().double(), model.W_out_x.detach().double(), model.D.detach().double()
    lam = model.lam.detach().double()
    n_h, d_x = A.shape
    n_g = Om.shape[0]
    W = max(d_x, 2 * n_h, 2 * n_g)
    l1 = LRULayer(W, dtype=f64)
    l2 = LRULayer(W, dtype=f64)
    eye = torch.eye(W, dtype=f64)
    with torch.no_grad():
        for layer in (l1, l2):
            for name in ("B_re", "B_im", "C_re", "C_im", "D_skip", "W_m", "W_x"):
                getattr(layer, name).zero_()
            layer.theta_log.fill_(-50.0)           # phase exp(-50): lam real
            layer.gamma_log.zero_()                # gamma = 1
            layer.C_re.copy_(eye)
        l1.nu_log.fill_(50.0)                      # lam = 0: layer 1 passes x~_t through
        l1.B_re.copy_(eye)
        l1.W_m[:n_h, :d_x] = eps * A
        l1.W_x[:n_h, :d_x] = Bx
        l1.W_x[n_h:2 * n_h, :d_x] = Bx
        l2.B_re[:n_h, :n_h] = (4.0 / eps) * torch.eye(n_h, dtype=f64)
        l2.B_re[:n_h, n_h:2 * n_h] = -(4.0 / eps) * torch.eye(n_h, dtype=f64)
        nu = torch.full((W,), 50.0, dtype=f64)
        nu[:n_h] = torch.log(-torch.log(lam.clamp(min=1e-300))).clamp(-50.0, 50.0)
        l2.nu_log.copy_(nu)
        l2.W_m[:n_g, :n_h] = eps * Om
        l2.W_x[:n_g, :n_h] = Ox
        l2.W_x[n_g:2 * n_g, :n_h] = Ox
    R = torch.zeros(D.shape[0], W, dtype=f64)
    R[:, :n_g] = (4.0 / eps) * D
    R[:, n_g:2 * n_g] = -(4.0 / eps) * D
    return nn.Sequential(l1, l2), R


def lru_in_from_attention(W_V, W_K, W_Q, eps: float, skip: bool = False):
    """One LRU In+Out (``skip=False``) or In+Skip (``skip=True``) layer + readout R implementing
    linear self-attention y_t = sum_{t' <= t} (W_V x_t') (W_K x_t')^T (W_Q x_t) to O(eps^2).

    Derived in Chapter 13, section "sec-lru-in".

    One key-value pair p = (i, j) per recurrent unit, lam = 1 (exp(-exp(-50)) = 1 in float64).
    Input GLU, block A: sigmoid(eps v_i) k_j, block B: sigmoid(0) k_j = k_j / 2; the input map
    B = (4/eps)(A - B) gives v_i k_j (1 + O(eps^2)), accumulated by the recurrence into
    S_ij = sum_{t'} v_i k_j, which C copies to y~ at A_p and B_p.  The query enters the output
    GLU's sigmoid branch: In+Skip reads it from the layer input (W_m = eps W_Q[j]); In+Out reads
    it from y~, where the diagonal skip D passes block Q of the input GLU, q_j / 2 (W_m = 0).
    Output units sigmoid(eps q_j) S_ij and sigmoid(0) S_ij, R = (4/eps) [+1, -1] summed over j.
    Width W = max(2 d_v d_k + d_k, d); inputs x (B, T, d) zero-padded to W.
    Returns ``(layer, R)`` (float64): y = layer(x padded) @ R.T approximates LSA(x).
    """
    from .attention import check_attention_weights

    W_V, W_K, W_Q = (w.double() for w in check_attention_weights(W_V, W_K, W_Q))
    eps = positive_real("eps", eps)
    f64 = torch.float64
    d_v, d = W_V.shape
    d_k = W_K.shape[0]
    n_kv = d_v * d_k
    W = max(2 * n_kv + d_k, d)
    A, Bk, Q = 0, n_kv, 2 * n_kv                       # block offsets in the GLU outputs
    layer = LRULayer(W, input_gate=True, skip_gate=skip, dtype=f64)
    R = torch.zeros(d_v, W, dtype=f64)
    with torch.no_grad():
        for name in ("B_re", "B_im", "C_re", "C_im", "D_skip", "W_m", "W_x", "Wi_m", "Wi_x"):
            getattr(layer, name).zero_()
        layer.theta_log.fill_(-50.0)                   # phase exp(-50): lam real
        layer.gamma_log.zero_()
        nu = torch.full((W,), 50.0, dtype=f64)         # lam = 0 on unused units
        nu[:n_kv] = -50.0                              # lam = 1 on the key-value units
        layer.nu_log.copy_(nu)
        for j in range(d_k):
            layer.Wi_x[Q + j, :d] = W_Q[j]             # q_j / 2 (sigmoid(0) = 1/2)
            layer.D_skip[Q + j] = 1.0
        for i in range(d_v):
            for j in range(d_k):
                p = i * d_k + j
                layer.Wi_m[A + p, :d] = eps * W_V[i]
                layer.Wi_x[A + p, :d] = W_K[j]
                layer.Wi_x[Bk + p, :d] = W_K[j]
                layer.B_re[p, A + p] = 4.0 / eps
                layer.B_re[p, Bk + p] = -4.0 / eps
                layer.C_re[A + p, p] = 1.0
                layer.C_re[Bk + p, p] = 1.0
                if skip:
                    layer.W_m[A + p, :d] = eps * W_Q[j]
                else:
                    layer.W_m[A + p, Q + j] = 2.0 * eps
                layer.W_x[A + p, A + p] = 1.0
                layer.W_x[Bk + p, Bk + p] = 1.0
                R[i, A + p] = 4.0 / eps
                R[i, Bk + p] = -4.0 / eps
    return layer, R


class ModuleStack(nn.Module):
    """K independent modules trained together by :func:`lib.online.train_online` (one step, K data streams).

    Used in Chapter 13, section "sec-fig4", to train the LRU, LSTM and GRU networks with
    :func:`lib.online.train_online`; :func:`lib.artefacts.load_run` returns the stored ones of section
    "sec-fig4-stored" in it.

    ``forward(x)`` with x (K, B, T, d) runs member k on x[k]; ``last_only`` keeps the last step.
    x is checked first (shape, dtype and device, finite); :meth:`forward_unchecked`, the training
    step's inner call, runs the members' ``forward_unchecked`` (where they have one) without
    checks (the trainer checks model and task once, before its first step).
    The general (unbatched) counterpart of :class:`lib.gated.StackedGatedRNN`, for any
    (B, T, d) -> (B, T, d_out) network such as :class:`RecurrentNet`.
    """

    def __init__(self, members):
        super().__init__()
        members = list(members)
        if not members or not all(isinstance(m, nn.Module) for m in members):
            raise TypeError("members must be a non-empty list of torch.nn.Module")
        sides = {(getattr(m, "d_in", None), getattr(m, "d_out", None)) for m in members}
        if len(sides) > 1:
            raise ValueError(f"members must share d_in and d_out, got (d_in, d_out) = {sorted(sides, key=str)}")
        self.d_in, self.d_out = sides.pop()
        self.members = nn.ModuleList(members)

    @property
    def K(self) -> int:
        return len(self.members)

    def member(self, k: int) -> nn.Module:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < self.K:
            raise IndexError(f"member index must be in [0, {self.K}), got {k!r}")
        return self.members[k]

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """(K, B, T, d_in) -> (K, B, T, d_out), or (K, B, d_out) with ``last_only``; x checked first."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[0] != self.K or x.numel() == 0 \
                or (self.d_in is not None and x.shape[3] != self.d_in):
            raise ValueError(f"x must be a tensor (K, B, T, d_in) = ({self.K}, B, T, {self.d_in or 'd_in'}) with "
                             f"B, T >= 1, got {tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        p = next(self.parameters(), None)
        if p is not None and (x.dtype != p.dtype or x.device != p.device):
            raise TypeError(f"x is {x.dtype} on {x.device} but the members' parameters are {p.dtype} on {p.device}")
        finite("x", x)
        return finite_output(self.forward_unchecked(x, last_only), x, self)

    def forward_unchecked(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """:meth:`forward` without checks: member k's ``forward_unchecked`` (where it has one) on x[k]."""
        outs = [getattr(m, "forward_unchecked", m)(x[k]) for k, m in enumerate(self.members)]
        return torch.stack([o[:, -1] for o in outs] if last_only else outs)
