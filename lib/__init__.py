"""lib: the small library behind the book *What recurrent networks really compute*.

Modules, by subject:
    linear_rnn   linear RNNs, Markov parameters, causal convolutions, Vandermonde realization
    data         the S1 recording and the protein secondary-structure set (checksummed)
    scaled_conv  the scaled 1-D convolution (eq. 8) and its weights rho_j (eq. 21)
    training     full-batch gradient descent shared by every Part I model
    plotting     the book's single matplotlib style
    experiments  Section 5: teacher data at a given SNR, S1 sequences, mini-batch GD, R^2, kernel limit

Every function takes tensors and plain numbers, returns tensors, works in float64 by
default and validates its arguments before doing any work.
"""
from .linear_rnn import (
    LinearRNN,
    causal_conv,
    chebyshev_nodes,
    equispaced_nodes,
    impulse_response,
    vandermonde_matrix,
    vandermonde_realization,
)
from .scaled_conv import ScaledConv, rho, rho_max
from .training import loss_fn, train_gd
from .experiments import (
    TapsRNN,
    add_output_noise,
    conv_features,
    delay_taps,
    gd_path,
    markov_taps,
    r2_score,
    rho_ridge,
    s1_sequences,
    teacher_dataset,
    train_minibatch,
)

__all__ = [
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
    "vandermonde_matrix",
    "vandermonde_realization",
    "TapsRNN",
    "add_output_noise",
    "conv_features",
    "delay_taps",
    "gd_path",
    "markov_taps",
    "r2_score",
    "rho_ridge",
    "s1_sequences",
    "teacher_dataset",
    "train_minibatch",
]
