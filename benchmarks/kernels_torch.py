"""The passes of the two training-step kernels (``lib/gated.c``, ``lib/recurrent.c``) written in
torch: the same algorithm, pass for pass, with torch operations where the C has loops.

``benchmarks/bench_kernels.py`` hands these to the hand-written steps in place of the compiled
passes (``lib.gated_step._step``, ``lib.recurrent_step.net_step`` take their passes as an
argument), so that the two sides of a row differ in the passes alone: the products left to BLAS,
the layout and the Python around them are the same.  Every pass takes the arguments of its C
function (tensors, views where the C takes a pointer into a tensor, sizes) and writes its outputs
into the tensors given; an argument the torch form does not need (a row stride, a thread count) is
accepted and ignored.  ``tests/test_bench_kernels.py`` holds both to the compiled passes (float64).
"""
from __future__ import annotations

import torch

from lib.diagonal import recur_

__all__ = ["GatedPasses", "RecurrentPasses"]


class GatedPasses:
    """The four passes of ``lib/gated.c`` (feature-major: every activation (K, rows, C), the C = T B
    columns ordered (t, b))."""

    @staticmethod
    def pack(src, dst, K, B, Tn, d, rows):
        """(K, B, T, d) -> (K, rows, T B), rows d.. set to 1."""
        out = dst.view(K, rows, Tn, B)
        out[:, :d] = src.reshape(K, B, Tn, d).permute(0, 3, 2, 1)
        out[:, d:] = 1

    @staticmethod
    def gates_scan(X, Wm, Wx, nu, lam, h, K, n, dx, Tn, B, threads):
        """lam = exp(-exp(nu)); h_t = lam h_{t-1} + (W_m X)_t (W_x X)_t."""
        lam.copy_(torch.exp(-torch.exp(nu)))
        torch.mul(torch.bmm(Wm, X), torch.bmm(Wx, X), out=h)
        recur_(h.view(K, n, Tn, B).transpose(1, 2), lam[:, :, None])

    @staticmethod
    def readout_loss(o, D, Y, gy, losses, gO, gD, K, n, dout, C, threads):
        """y = D (o_m o_x), r = y - Y, L_k = 1/2 mean r^2, g_y = r / (d_out C); with gO, dL/do and dL/dD."""
        s = 1.0 / (dout * C)
        p = o[:, :n] * o[:, n:]
        r = torch.bmm(D, p).sub_(Y)
        losses.copy_(r.square().sum((1, 2)).mul_(0.5 * s))
        torch.mul(r, s, out=gy)
        if gO is None:
            return
        gp = torch.bmm(D.transpose(1, 2), gy)
        torch.mul(gp, o[:, n:], out=gO[:, :n])
        torch.mul(gp, o[:, :n], out=gO[:, n:])
        torch.bmm(gy, p.transpose(1, 2), out=gD)

    @staticmethod
    def gates_scan_back(X, Wm, Wx, nu, lam, h, a, gWm, gWx, gnu, K, n, dx, Tn, B, threads):
        """a_t += lam a_{t+1} from the end; dL/dnu = -exp(nu) lam sum_t a_{t+1} h_t; dL/dW_in."""
        av, hv = a.view(K, n, Tn, B), h.view(K, n, Tn, B)
        for t in range(Tn - 2, -1, -1):
            av[:, :, t].addcmul_(av[:, :, t + 1], lam[:, :, None])
        glam = (av[:, :, 1:] * hv[:, :, :-1]).sum((2, 3))
        torch.mul(-torch.exp(nu) * lam, glam, out=gnu)
        Xt = X.transpose(1, 2)
        torch.bmm(a * torch.bmm(Wx, X), Xt, out=gWm)
        torch.bmm(a * torch.bmm(Wm, X), Xt, out=gWx)


class RecurrentPasses:
    """The passes of ``lib/recurrent.c`` (rows M = B T ordered (b, t); the LRU's complex states as
    [Re | Im] columns)."""

    @staticmethod
    def glu_fwd(am, ax, y, M, w, sa, sx):
        torch.mul(torch.sigmoid(am), ax, out=y)

    @staticmethod
    def glu_bwd(am, ax, dy, dam, dax, M, w, sa, sx):
        s = torch.sigmoid(am)
        dam.copy_(dy * ax * s * (1 - s))
        dax.copy_(dy * s)

    @staticmethod
    def lru_prep(B_re, B_im, gamma_log, C_re, C_im, nu, theta, W_B, W_C, lam, n, w):
        g = torch.exp(gamma_log)[:, None]
        torch.cat([g * B_re, g * B_im], out=W_B)
        torch.cat([C_re, -C_im], 1, out=W_C)
        r, phi = torch.exp(-torch.exp(nu)), torch.exp(theta)
        torch.cat([r * torch.cos(phi), r * torch.sin(phi)], out=lam)

    @staticmethod
    def crecur_fwd(p, h, lam, Bn, Tn, n):
        """h_t = lam h_{t-1} + p_t (complex, [Re | Im]); h may be p."""
        lr, li = lam[:n], lam[n:]
        hv, pv = h.view(Bn, Tn, 2 * n), p.view(Bn, Tn, 2 * n)
        hv[:, 0] = pv[:, 0]
        for t in range(1, Tn):
            hr, hi = hv[:, t - 1, :n], hv[:, t - 1, n:]
            hv[:, t] = torch.cat([lr * hr - li * hi, lr * hi + li * hr], 1) + pv[:, t]

    @staticmethod
    def crecur_bwd(a, h, lam, glam, Bn, Tn, n):
        """a (dL/dh on entry) -> the adjoint a_t = dL/dh_t + conj(lam) a_{t+1}; glam = dL/d[Re lam | Im lam]."""
        lr, li = lam[:n], lam[n:]
        av, hv = a.view(Bn, Tn, 2 * n), h.view(Bn, Tn, 2 * n)
        for t in range(Tn - 1, 0, -1):
            ar, ai = av[:, t, :n], av[:, t, n:]
            av[:, t - 1] += torch.cat([lr * ar + li * ai, lr * ai - li * ar], 1)
        ar, ai, hr, hi = av[:, 1:, :n], av[:, 1:, n:], hv[:, :-1, :n], hv[:, :-1, n:]
        torch.cat([(ar * hr + ai * hi).sum((0, 1)), (ai * hr - ar * hi).sum((0, 1))], out=glam)

    @staticmethod
    def skip_bwd(dy, x, D, dx, dD, M, w):
        torch.sum(dy * x, 0, out=dD)
        torch.mul(dy, D, out=dx)

    @staticmethod
    def lru_prep_bwd(dW_B, dW_C, glam, B_re, B_im, gamma_log, nu, theta, lam, dB_re, dB_im, dgamma, dC_re, dC_im,
                     dnu, dtheta, n, w):
        g = torch.exp(gamma_log)
        lr, li, gr, gi = lam[:n], lam[n:], glam[:n], glam[n:]
        torch.mul(g[:, None], dW_B[:n], out=dB_re)
        torch.mul(g[:, None], dW_B[n:], out=dB_im)
        torch.mul(g, (B_re * dW_B[:n] + B_im * dW_B[n:]).sum(1), out=dgamma)
        torch.mul(-torch.exp(nu), gr * lr + gi * li, out=dnu)
        torch.mul(torch.exp(theta), gi * lr - gr * li, out=dtheta)
        dC_re.copy_(dW_C[:, :n])
        torch.neg(dW_C[:, n:], out=dC_im)

    # the LSTM (G = 4 gates, S (M, 6w): i, f, g, o, c, tanh c) and the GRU (G = 3, S (M, 4w): r, z, n,
    # and hn = W_hn h_{t-1} + b_hn), step by step: the hidden projection of every row, then the cell
    @staticmethod
    def _recur_fwd(G, Xp, W_hh, b_hh, H, S, Bn, Tn, w):
        Xv, Hv, Sv = Xp.view(Bn, Tn, G * w), H.view(Bn, Tn, w), S.view(Bn, Tn, -1)
        for t in range(Tn):
            P = torch.addmm(b_hh, Hv[:, t - 1], W_hh.t()) if t else b_hh.expand(Bn, G * w)
            if G == 4:
                a = Xv[:, t] + P
                i, f, o = torch.sigmoid(a[:, :w]), torch.sigmoid(a[:, w:2 * w]), torch.sigmoid(a[:, 3 * w:])
                g = torch.tanh(a[:, 2 * w:3 * w])
                c = i * g + (f * Sv[:, t - 1, 4 * w:5 * w] if t else 0)
                tc = torch.tanh(c)
                Sv[:, t] = torch.cat([i, f, g, o, c, tc], 1)
                Hv[:, t] = o * tc
            else:
                rz = torch.sigmoid(Xv[:, t, :2 * w] + P[:, :2 * w])
                r, z, hn = rz[:, :w], rz[:, w:], P[:, 2 * w:]
                nn_ = torch.tanh(Xv[:, t, 2 * w:] + r * hn)
                Sv[:, t] = torch.cat([r, z, nn_, hn], 1)
                Hv[:, t] = (1 - z) * nn_ + (z * Hv[:, t - 1] if t else 0)

    @staticmethod
    def _recur_bwd(G, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w):
        dHv, Hv, Sv = dH.view(Bn, Tn, w), H.view(Bn, Tn, w), S.view(Bn, Tn, -1)
        dXv, dHsv = dXp.view(Bn, Tn, G * w), dHs.view(Bn, Tn, G * w)
        dh, dc = dH.new_zeros(Bn, w), dH.new_zeros(Bn, w)
        db_hh.zero_()
        dHsv[:, Tn - 1] = 0
        for t in range(Tn - 1, -1, -1):
            s, gh = Sv[:, t], dh + dHv[:, t]
            if G == 4:
                i, f, g, o, tc = s[:, :w], s[:, w:2 * w], s[:, 2 * w:3 * w], s[:, 3 * w:4 * w], s[:, 5 * w:]
                cp = Sv[:, t - 1, 4 * w:5 * w] if t else 0
                gc = dc + gh * o * (1 - tc * tc)
                dp = torch.cat([gc * g * i * (1 - i), gc * cp * f * (1 - f), gc * i * (1 - g * g),
                                gh * tc * o * (1 - o)], 1)
                dc = gc * f
                dXv[:, t] = dp
            else:
                r, z, nn_, hn = s[:, :w], s[:, w:2 * w], s[:, 2 * w:3 * w], s[:, 3 * w:]
                hp = Hv[:, t - 1] if t else 0
                dan = gh * (1 - z) * (1 - nn_ * nn_)
                daz = gh * (hp - nn_) * z * (1 - z)
                dar = dan * hn * r * (1 - r)
                dXv[:, t] = torch.cat([dar, daz, dan], 1)
                dp = torch.cat([dar, daz, dan * r], 1)
                dh = gh * z
            db_hh += dp.sum(0)
            if t > 0:
                dHsv[:, t - 1] = dp
                dh = dh + dp @ W_hh if G == 3 else dp @ W_hh

    @classmethod
    def lstm_fwd(cls, Xp, W_hh, b_hh, H, S, Bn, Tn, w):
        cls._recur_fwd(4, Xp, W_hh, b_hh, H, S, Bn, Tn, w)

    @classmethod
    def gru_fwd(cls, Xp, W_hh, b_hh, H, S, Bn, Tn, w):
        cls._recur_fwd(3, Xp, W_hh, b_hh, H, S, Bn, Tn, w)

    @classmethod
    def lstm_bwd(cls, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w):
        cls._recur_bwd(4, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w)

    @classmethod
    def gru_bwd(cls, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w):
        cls._recur_bwd(3, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w)
