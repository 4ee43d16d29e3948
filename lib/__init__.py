"""lib: the science of the book *What recurrent networks really compute* -- models, kernels,
constructions, data and training; nothing here needs a notebook (the book's own machinery --
the experiment registry, stored runs, fidelity records, tables, plotting -- is ``lib.book``).

Modules, by subject:
  Part I (Emami et al. 2021)
    linear_rnn       linear RNNs, Markov parameters, causal convolutions, Vandermonde realization
    krylov           the two Krylov sequences of the Markov engine in one pass over W (krylov.c)
    ntk              tangent kernels: Thm 3.2 (conv), empirical (torch.func), M_n = J J^T factor
    scaled_conv      the scaled 1-D convolution (eq. 8), its weights rho_j (eq. 21), its closed-form
                     training (the kernel-regime limit) and the memory profile of trained taps
    linear_teacher   teacher-student data of a linear RNN teacher at a given SNR, delays
    training         gradient descent, full-batch and mini-batch; AdamW for one model (the plain
                     reference of the online trainer); R^2 and early stopping
  Part II (Sperduti 2015)
    sequence_memory  linear autoencoders for sequences (§2.1)
    linear_ff        a linear feedforward network as a linear RNN: rank and timespan, the SVD
                     construction and Theorem 3.1's forgetting memory (§3.1)
    nonlinear_ff     a tanh feedforward network as an RNN: 1-time-step networks, the general
                     construction (fast path and literal reference), with forgetting units (§3.2)
    tanh_memory      linear memory units replaced by beta tanh(z / beta) units: the error bound (§3.2)
    smallest_k       the smallest memory that keeps the predictions, at every k (§4, Fig. 5)
    protein          §4: the amino-acid code, the sparse prefix matrix, the network trained on it
  Part III (Zucchet et al. 2023)
    attention        causal linear self-attention
    diagonal         diagonal linear recurrences h_t = lam h_{t-1} + u_t: scan, in-place loop with
                     its adjoint backward, reference (the state update of every diagonal RNN)
    gated            gated diagonal linear RNNs (eq. 2), the attention construction, polynomials
    gated_analysis   what a trained gated RNN computes, read off its weights: memory x input kernels,
                     their ranks and degrees, the exact compact network, zero weights, App. B.2's merge
    recurrent_cells  LRU / LSTM / GRU networks, the LSTM construction of App. A, ModuleStack
    gated_step       the stacked gated RNNs' training step with a hand-written backward (gated.c)
    recurrent_step   the LRU / LSTM / GRU networks' training step, hand-written backward (recurrent.c)
    architectures    the architecture registry: constructor, label, colour and training step of every kind
    tasks            the online tasks (attention teacher-student, in-context regression), their objective
    online           the online trainer of App. B.1 for K networks at once (flat AdamW, cosine
                     schedule, checkpoints, snapshots; CUDA-graph captured on GPUs)
    icl              in-context linear regression, eta*, the optimal one-step GD loss
  Part IV and shared
    realizations     the four realizations of a convolution as an RNN
    diagonal_ntk     the tangent kernel of diagonal (and input-gated) linear RNNs in Markov-parameter
                     space, its wide limit from the moments of lam, kernel-regime GD in tap space
    data             the S1 recording and the protein secondary-structure set (checksummed)
    kernels          the loader of the small C kernels (compiled on first use, checked, cached)
    storage          files that survive a crash, a full disk and a second process: atomic
                     writes, tensors-only loads, file locks naming their holder

Every function takes tensors and plain numbers, returns tensors, works in float64 by
default and validates its arguments before doing any work.  Every module sits above the modules
it imports (tests/test_import_graph.py): the models know nothing of their training steps, the
steps sit above the models, the architecture registry above the steps, the trainer above it.
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
    power_law_fit,
    toeplitz,
)
from .scaled_conv import (ScaledConv, conv_features, fit_memory_nu_W, gd_path, learned_fraction, rho, rho_max,
                          rho_ridge, white_input_memory)
from .training import loss_fn, r2_score, select_by_validation, train_adamw, train_gd, train_minibatch
from .protein import train_feedforward
from .online import FlatAdamW, cosine_lr, train_online
from .tasks import ICLTask, AttentionTeacherTask, lsa_teachers
from .data import s1_blocks, s1_sequences, s1_stretches
from .linear_teacher import add_output_noise, delay_taps, linear_teacher_dataset
from .sequence_memory import (SequenceAutoencoder, autoencoder_matrices, check_sequences, encode,
                              encode_reference, fit_sequence_autoencoder, pad_sequences,
                              shift_operators, state_matrix, state_matrix_reference, thin_svd)
from .linear_ff import (LinearStateSpace, forgetting_shift_register, lag_matrix, linear_ff_outputs,
                        linear_ff_to_rnn, rank_and_timespan, theorem31_bound)
from .nonlinear_ff import (FeedforwardNet, MemoryRNN, OneStepFF, general_ff_to_rnn, general_ff_to_rnn_forgetting,
                           general_ff_to_rnn_reference, one_step_ff_to_rnn)
from .tanh_memory import tanh_beta_star, tanh_memory_beta, tanh_memory_state_bound
from .smallest_k import projected_scan, smallest_kept_k
from .attention import LinearSelfAttention, lsa_instantaneous_tensor
from .diagonal import diagonal_recurrence, diagonal_scan, diagonal_scan_reference
from .gated import (
    GatedLinearRNN,
    StackedGatedRNN,
    construction_size,
    gated_rnn_from_attention,
    instantaneous_tensor,
    polynomial_coefficients,
)
from .icl import eta_star, gd_loss, gd_predict, icl_batch, optimal_gd_loss
from .recurrent_cells import (RECURRENT_KINDS, LRULayer, ModuleStack, RecurrentNet, glu_gating, lru_from_gated,
                              lru_in_from_attention, lstm_from_attention)
from .realizations import memory_realization, rotation_realization, shift_register_realization

__all__ = [
    "conv_ntk",
    "conv_ntk_factor",
    "empirical_ntk",
    "factored_ntk",
    "markov_jacobian",
    "markov_ntk_factor",
    "markov_ntk_factor_reference",
    "toeplitz",
    "power_law_fit",
    "ScaledConv",
    "rho",
    "rho_max",
    "loss_fn",
    "train_gd",
    "train_minibatch",
    "train_feedforward",
    "train_adamw",
    "train_online",
    "FlatAdamW",
    "cosine_lr",
    "ModuleStack",
    "ICLTask",
    "AttentionTeacherTask",
    "lsa_teachers",
    "StackedGatedRNN",
    "LinearRNN",
    "causal_conv",
    "chebyshev_nodes",
    "equispaced_nodes",
    "impulse_response",
    "markov_parameters",
    "vandermonde_matrix",
    "vandermonde_realization",
    "shift_register_realization",
    "rotation_realization",
    "memory_realization",
    "add_output_noise",
    "conv_features",
    "delay_taps",
    "gd_path",
    "r2_score",
    "rho_ridge",
    "s1_sequences",
    "s1_blocks",
    "s1_stretches",
    "linear_teacher_dataset",
    "select_by_validation",
    "learned_fraction",
    "white_input_memory",
    "fit_memory_nu_W",
    "SequenceAutoencoder", "autoencoder_matrices", "check_sequences", "encode", "encode_reference",
    "fit_sequence_autoencoder", "pad_sequences", "shift_operators", "state_matrix",
    "state_matrix_reference", "thin_svd",
    "FeedforwardNet", "LinearStateSpace", "MemoryRNN", "OneStepFF", "general_ff_to_rnn",
    "general_ff_to_rnn_reference", "lag_matrix", "linear_ff_outputs", "linear_ff_to_rnn",
    "one_step_ff_to_rnn", "rank_and_timespan", "tanh_beta_star", "tanh_memory_beta",
    "tanh_memory_state_bound", "theorem31_bound",
    "forgetting_shift_register", "general_ff_to_rnn_forgetting", "projected_scan", "smallest_kept_k",
    "LinearSelfAttention",
    "lsa_instantaneous_tensor",
    "GatedLinearRNN",
    "construction_size",
    "diagonal_scan",
    "diagonal_recurrence",
    "diagonal_scan_reference",
    "gated_rnn_from_attention",
    "instantaneous_tensor",
    "polynomial_coefficients",
    "eta_star",
    "gd_loss",
    "gd_predict",
    "icl_batch",
    "optimal_gd_loss",
    "RECURRENT_KINDS",
    "LRULayer",
    "RecurrentNet",
    "glu_gating",
    "lstm_from_attention",
    "lru_from_gated",
    "lru_in_from_attention",
]
