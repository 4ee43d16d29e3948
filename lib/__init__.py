"""lib: the small library behind the book *What recurrent networks really compute*.

Modules, by subject:
    linear_rnn   linear RNNs, Markov parameters, causal convolutions, Vandermonde realization
    data         the S1 recording and the protein secondary-structure set (checksummed)
    scaled_conv  the scaled 1-D convolution (eq. 8) and its weights rho_j (eq. 21)
    ntk          tangent kernels: Thm 3.2 (conv), empirical (torch.func), M_n = J J^T factor
    training     full-batch gradient descent shared by every Part I model
    plotting     the book's single matplotlib style

Every function takes tensors and plain numbers, returns tensors, works in float64 by
default and validates its arguments before doing any work.
"""
from .linear_rnn import (
    LinearRNN,
    causal_conv,
    chebyshev_nodes,
    equispaced_nodes,
    impulse_response,
    markov_parameters,
    vandermonde_matrix,
    vandermonde_realization,
)
from .ntk import (
    conv_ntk,
    conv_ntk_factor,
    empirical_ntk,
    factored_ntk,
    markov_jacobian,
    markov_ntk_factor,
    markov_ntk_factor_reference,
    toeplitz,
)
from .scaled_conv import ScaledConv, rho, rho_max
from .training import loss_fn, train_gd

__all__ = [
    "conv_ntk",
    "conv_ntk_factor",
    "empirical_ntk",
    "factored_ntk",
    "markov_jacobian",
    "markov_ntk_factor",
    "markov_ntk_factor_reference",
    "toeplitz",
    "ScaledConv",
    "rho",
    "rho_max",
    "loss_fn",
    "train_gd",
    "LinearRNN",
    "causal_conv",
    "chebyshev_nodes",
    "equispaced_nodes",
    "impulse_response",
    "markov_parameters",
    "vandermonde_matrix",
    "vandermonde_realization",
]
