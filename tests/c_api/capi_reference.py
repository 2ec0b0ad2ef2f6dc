"""Float64 NumPy references of the four operators, written from the formulas, with the magnitude
of the terms each output element sums (for honest error bounds).

Every function takes float64 arrays and returns ``{output name: (reference, magnitude)}``.
``magnitude`` bounds the sum of the absolute values of the terms an fp32 implementation
accumulates for that element, so ``|kernel - reference| <= u_out*|reference| + k*eps32*magnitude``
where ``k`` grows with the number of terms (see ``tolerance``).
"""
from __future__ import annotations

import numpy as np

EPS32 = 2.0 ** -24


# ---- softmax backward ----------------------------------------------------------------------------

def softmax_backward(grad_output, output, dim):
    """out = y * (g - sum(g * y, dim)) (the derivative of softmax applied to g)."""
    g = np.asarray(grad_output, np.float64)
    y = np.asarray(output, np.float64)
    if g.ndim == 0:
        g, y = g.reshape(1), y.reshape(1)
        squeeze = True
    else:
        squeeze = False
    s = np.sum(g * y, axis=dim, keepdims=True)
    s_abs = np.sum(np.abs(g * y), axis=dim, keepdims=True)
    out = y * (g - s)
    mag = np.abs(y) * (np.abs(g) + s_abs)
    terms = g.shape[dim] + 4
    if squeeze:
        out, mag = out.reshape(()), mag.reshape(())
    return {"out": (out, mag * terms)}


# ---- prelu backward ------------------------------------------------------------------------------

def prelu_backward(grad_output, self, weight):
    """gradInput = g where x > 0 else w*g; gradWeight[c] = sum(g*x where x <= 0) over all but the
    channel dim (dim 1 when self has >= 2 dims). gradOutput broadcasts to self's shape."""
    x = np.asarray(self, np.float64)
    g = np.broadcast_to(np.asarray(grad_output, np.float64), x.shape)
    w = np.asarray(weight, np.float64).reshape(-1)
    channels = x.shape[1] if x.ndim >= 2 else 1
    per_channel = w.size != 1
    if per_channel:
        shape = [1] * x.ndim
        shape[1] = channels
        w_b = w.reshape(shape)
    else:
        w_b = w.reshape(())
    grad_input = np.where(x > 0, g, w_b * g)
    contrib = np.where(x > 0, 0.0, x * g)
    if per_channel:
        axes = tuple(i for i in range(x.ndim) if i != 1)
        grad_weight = contrib.sum(axis=axes)
        mag_w = np.abs(contrib).sum(axis=axes)
        terms = x.size // channels + 2
    else:
        grad_weight = np.asarray(contrib.sum()).reshape(np.shape(weight))
        mag_w = np.asarray(np.abs(contrib).sum()).reshape(np.shape(weight))
        terms = x.size + 2
    return {"gradInput": (grad_input, np.abs(grad_input) * 2),
            "gradWeight": (grad_weight, mag_w * terms)}


# ---- group norm backward -------------------------------------------------------------------------

def group_norm_backward(grad_out, input, mean, rstd, gamma, N, C, HxW, group):
    """The backward of y = (x - mean) * rstd * gamma + beta over groups of C/group channels, with
    mean and rstd given (as PyTorch's native_group_norm_backward)."""
    dy = np.asarray(grad_out, np.float64).reshape(N, C, HxW)
    x = np.asarray(input, np.float64).reshape(N, C, HxW)
    G = group
    D = C // G
    mu = np.asarray(mean, np.float64).reshape(N, G)
    rs = np.asarray(rstd, np.float64).reshape(N, G)
    gam = np.ones(C) if gamma is None else np.asarray(gamma, np.float64).reshape(C)

    ds = (dy * x).sum(axis=2)            # [N, C]
    db = dy.sum(axis=2)
    ds_abs = np.abs(dy * x).sum(axis=2)
    db_abs = np.abs(dy).sum(axis=2)
    mu_c = np.repeat(mu, D, axis=1)      # [N, C]: the group's mean for each channel
    rs_c = np.repeat(rs, D, axis=1)

    grad_gamma = ((ds - db * mu_c) * rs_c).sum(axis=0)
    mag_gamma = ((ds_abs + db_abs * np.abs(mu_c)) * np.abs(rs_c)).sum(axis=0)
    grad_beta = db.sum(axis=0)
    mag_beta = db_abs.sum(axis=0)

    s = 1.0 / (D * HxW)
    ds_g = (ds * gam).reshape(N, G, D).sum(axis=2)       # [N, G]
    db_g = (db * gam).reshape(N, G, D).sum(axis=2)
    ds_g_abs = (ds_abs * np.abs(gam)).reshape(N, G, D).sum(axis=2)
    db_g_abs = (db_abs * np.abs(gam)).reshape(N, G, D).sum(axis=2)
    b = (db_g * mu - ds_g) * rs ** 3 * s
    c = -b * mu - db_g * rs * s
    b_abs = (db_g_abs * np.abs(mu) + ds_g_abs) * np.abs(rs) ** 3 * s
    c_abs = b_abs * np.abs(mu) + db_g_abs * np.abs(rs) * s
    b_c, c_c = np.repeat(b, D, axis=1)[:, :, None], np.repeat(c, D, axis=1)[:, :, None]
    grad_input = rs_c[:, :, None] * gam[None, :, None] * dy + b_c * x + c_c
    mag_input = (np.abs(rs_c[:, :, None] * gam[None, :, None] * dy)
                 + np.repeat(b_abs, D, axis=1)[:, :, None] * np.abs(x)
                 + np.repeat(c_abs, D, axis=1)[:, :, None])

    terms_in = D * HxW + 8
    terms_gb = N * HxW + 4
    return {"gradInput": (grad_input.reshape(np.shape(input)), mag_input.reshape(np.shape(input)) * terms_in),
            "gradGammaOut": (grad_gamma, mag_gamma * terms_gb),
            "gradBetaOut": (grad_beta, mag_beta * terms_gb)}


# ---- grid sampler 2-D backward -------------------------------------------------------------------

A_CUBIC = -0.75


def _unnormalize(coord, size, align_corners):
    """Grid coordinate in [-1, 1] -> pixel coordinate, and d(pixel)/d(coord)."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _clip(x, size):
    """Clamp to [0, size-1]; derivative 0 where clamped."""
    if x < 0:
        return 0.0, 0.0
    if x > size - 1:
        return float(size - 1), 0.0
    return x, 1.0


def _reflect(x, twice_low, twice_high):
    """Reflect x into [twice_low/2, twice_high/2]; derivative +-1."""
    if twice_low == twice_high:
        return 0.0, 0.0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = x - low
    sign = 1.0
    if x < 0:
        sign, x = -1.0, -x
    extra = np.fmod(x, span)
    flips = int(np.floor(x / span))
    if flips % 2 == 0:
        return extra + low, sign
    return span - extra + low, -sign


def _pad_coordinate(x, size, padding_mode, align_corners):
    """Apply the padding mode to a pixel coordinate; returns it and its derivative."""
    if padding_mode == 0:
        return x, 1.0
    if padding_mode == 1:
        return _clip(x, size)
    if align_corners:
        x, d1 = _reflect(x, 0, 2 * (size - 1))
    else:
        x, d1 = _reflect(x, -1, 2 * size - 1)
    x, d2 = _clip(x, size)
    return x, d1 * d2


def _cubic_weights(t):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for a fraction t, and their
    derivatives with respect to t."""
    A = A_CUBIC

    def near(d):   # |d| <= 1
        return ((A + 2) * d - (A + 3)) * d * d + 1

    def near_d(d):
        return 3 * (A + 2) * d * d - 2 * (A + 3) * d

    def far(d):    # 1 < |d| < 2
        return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A

    def far_d(d):
        return 3 * A * d * d - 10 * A * d + 8 * A

    w = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    dw = [far_d(t + 1), near_d(t), -near_d(1 - t), -far_d(2 - t)]
    return w, dw


def grid_sampler2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                            align_corners):
    """Gradients of PyTorch's grid_sample (2-D) with respect to input and grid."""
    go = np.asarray(grad_output, np.float64)
    inp = np.asarray(input, np.float64)
    grd = np.asarray(grid, np.float64)
    N, C, H, W = inp.shape
    Ho, Wo = grd.shape[1], grd.shape[2]
    g_in = np.zeros_like(inp)
    m_in = np.zeros_like(inp)
    g_grid = np.zeros_like(grd)
    m_grid = np.zeros_like(grd)

    for n in range(N):
        for h in range(Ho):
            for w in range(Wo):
                gvec = go[n, :, h, w]                      # [C]
                ix, mx = _unnormalize(grd[n, h, w, 0], W, align_corners)
                iy, my = _unnormalize(grd[n, h, w, 1], H, align_corners)
                if interpolation_mode == 2:
                    taps_x = int(np.floor(ix)) - 1
                    taps_y = int(np.floor(iy)) - 1
                    wx, dwx = _cubic_weights(ix - np.floor(ix))
                    wy, dwy = _cubic_weights(iy - np.floor(iy))
                    gx = gy = ax = ay = 0.0
                    for j in range(4):
                        for i in range(4):
                            px, _ = _pad_coordinate(float(taps_x + i), W, padding_mode, align_corners)
                            py, _ = _pad_coordinate(float(taps_y + j), H, padding_mode, align_corners)
                            px, py = int(px), int(py)
                            if not (0 <= px < W and 0 <= py < H):
                                continue
                            g_in[n, :, py, px] += gvec * wx[i] * wy[j]
                            m_in[n, :, py, px] += np.abs(gvec) * (abs(wx[i] * wy[j]) + 1)
                            v = inp[n, :, py, px]
                            gx += np.sum(v * gvec) * dwx[i] * wy[j]
                            gy += np.sum(v * gvec) * wx[i] * dwy[j]
                            ax += np.sum(np.abs(v * gvec)) * (abs(dwx[i] * wy[j]) + 1)
                            ay += np.sum(np.abs(v * gvec)) * (abs(wx[i] * dwy[j]) + 1)
                    g_grid[n, h, w] = (gx * mx, gy * my)
                    m_grid[n, h, w] = (ax * abs(mx), ay * abs(my))
                    continue

                ix, dx = _pad_coordinate(ix, W, padding_mode, align_corners)
                iy, dy = _pad_coordinate(iy, H, padding_mode, align_corners)
                if interpolation_mode == 1:
                    px, py = int(np.rint(ix)), int(np.rint(iy))   # round half to even
                    if 0 <= px < W and 0 <= py < H:
                        g_in[n, :, py, px] += gvec
                        m_in[n, :, py, px] += np.abs(gvec)
                    continue   # the grid gradient of nearest sampling is 0

                x0, y0 = int(np.floor(ix)), int(np.floor(iy))
                fx, fy = ix - x0, iy - y0
                gx = gy = ax = ay = 0.0
                # corner (x0+a, y0+b): weight (a ? fx : 1-fx) * (b ? fy : 1-fy)
                for b in (0, 1):
                    for a in (0, 1):
                        px, py = x0 + a, y0 + b
                        if not (0 <= px < W and 0 <= py < H):
                            continue
                        wxa = fx if a else 1 - fx
                        wyb = fy if b else 1 - fy
                        g_in[n, :, py, px] += gvec * wxa * wyb
                        m_in[n, :, py, px] += np.abs(gvec) * (abs(wxa * wyb) + 1)
                        s = np.sum(inp[n, :, py, px] * gvec)
                        sa = np.sum(np.abs(inp[n, :, py, px] * gvec))
                        gx += s * (1 if a else -1) * wyb
                        gy += s * wxa * (1 if b else -1)
                        ax += sa * (abs(wyb) + 1)
                        ay += sa * (abs(wxa) + 1)
                g_grid[n, h, w] = (gx * dx * mx, gy * dy * my)
                m_grid[n, h, w] = (ax * abs(mx), ay * abs(my))

    # Pixel coordinates carry an fp32 error of about eps*size, which every weight inherits.
    coord_terms = 4 * (H + W) + 16
    terms_in = coord_terms
    terms_grid = 16 * C + coord_terms
    return {"inputGrad": (g_in, m_in * terms_in), "gridGrad": (g_grid, m_grid * terms_grid)}


# ---- bounds --------------------------------------------------------------------------------------

# Half an ulp at 1 and half the smallest subnormal spacing of each output dtype.
ROUNDING = {"float32": (2.0 ** -24, 2.0 ** -150), "float16": (2.0 ** -11, 2.0 ** -25),
            "bfloat16": (2.0 ** -8, 2.0 ** -134), "float64": (2.0 ** -53, 0.0)}


def tolerance(reference, magnitude, out_dtype):
    """Per-element bound: the final rounding to the output dtype plus the fp32 error of the
    computation (EPS32 per term of the magnitude, which already counts the terms)."""
    unit, tiny = ROUNDING[out_dtype]
    return unit * np.abs(reference) + 2 * EPS32 * np.asarray(magnitude) + tiny
