"""lib: the small library behind the book *What recurrent networks really compute*.

Modules, by subject:
    linear_rnn   linear RNNs, Markov parameters, causal convolutions, Vandermonde realization
    krylov       the two Krylov sequences of the Markov engine in one pass over W (a small C
                 kernel, compiled on first use; torch products without a compiler)
    data         the S1 recording (and its train / validation / test sequences) and the protein
                 secondary-structure set (checksummed)
    teacher      Part I's teacher-student data: a linear system's outputs at a given SNR, delays
    scaled_conv  the scaled 1-D convolution (eq. 8), its weights rho_j (eq. 21), its closed-form
                 training (the kernel-regime limit) and the memory profile of trained taps
    ntk          tangent kernels: Thm 3.2 (conv), empirical (torch.func), M_n = J J^T factor
    training     every training loop: gradient descent, full-batch and mini-batch (Part I),
                 Adam on the protein network, online AdamW for one or K stacked models
                 (Part III: device-aware, resumable, CUDA-graph captured on GPUs); R^2 and
                 early stopping
    tasks        the online tasks of Part III (teacher-student, in-context regression)
    artefacts    the paper-scale runs stored in results/, read back with their checksums
    plotting     the book's single matplotlib style
    sequence_memory  linear autoencoders for sequences (Sperduti 2015, §2.1)
    ff_to_rnn    feedforward -> recurrent constructions, linear and nonlinear (Sperduti 2015, §3)
    protein      Sperduti's §4: the amino-acid code, the sparse prefix matrix and the §4
                 network's outputs through it (trained by training.train_feedforward)
    attention    causal linear self-attention (Part III)
    diagonal     diagonal linear recurrences h_t = lam h_{t-1} + u_t: scan, in-place loop with
                 its adjoint backward, reference (the state update of every diagonal RNN)
    gated        gated diagonal linear RNNs, the attention construction, exact polynomials
    icl          in-context linear regression, eta*, the optimal one-step GD loss
    recurrent_cells  LRU / LSTM / GRU networks and the LSTM construction of App. A
    claims       a chapter's claims: asserted at the settings they were argued for, else reported
    fidelity     the papers' claims and slips as the chapters record them, for the fidelity appendix
    notebook     what every chapter does the same way: the scale rule, rel_err, stored runs, tables

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
    power_law_fit,
    toeplitz,
)
from .scaled_conv import (ScaledConv, conv_features, fit_memory_nu_W, gd_path, learned_fraction, rho, rho_max,
                          rho_ridge, white_input_memory)
from .training import (loss_fn, r2_score, select_by_validation, train_adamw, train_feedforward, train_gd,
                       train_minibatch)
from .online import FlatAdamW, cosine_lr, train_online
from .tasks import ICLTask, TeacherTask, lsa_teachers
from .artefacts import load_run
from .data import s1_sequences
from .teacher import add_output_noise, delay_taps, teacher_dataset
from .sequence_memory import (SequenceAutoencoder, autoencoder_matrices, check_sequences, encode,
                              encode_reference, fit_sequence_autoencoder, pad_sequences,
                              shift_operators, state_matrix, state_matrix_reference, thin_svd)
from .ff_to_rnn import (FeedforwardNet, LinearStateSpace, MemoryRNN, OneStepFF, general_ff_to_rnn,
                        general_ff_to_rnn_reference, lag_matrix, linear_ff_outputs, linear_ff_to_rnn,
                        one_step_ff_to_rnn, rank_and_timespan, tanh_beta_star, tanh_memory_beta,
                        tanh_memory_state_bound, theorem31_bound)
from .ff_to_rnn import forgetting_shift_register, general_ff_to_rnn_forgetting, projected_scan, smallest_kept_k
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
from .claims import Claims
from . import fidelity
from .realizations import memory_realization, rotation_realization, shift_register_realization

__all__ = [
    "Claims",
    "fidelity",
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
    "TeacherTask",
    "lsa_teachers",
    "load_run",
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
    "teacher_dataset",
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
