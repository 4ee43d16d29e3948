"""lib.book.plotting.finish_width_sweep: the construction lines, the log-log axes, the labels and the legend."""
import matplotlib.pyplot as plt

from lib.book.plotting import finish_width_sweep, subplots


def test_finish_width_sweep_draws_lines_labels_and_legend():
    fig, ax = subplots()
    ax.plot([8, 16, 32], [1e-1, 1e-2, 1e-3], "o-", label="loss")
    finish_width_sweep(ax, [(27, ":", "compact construction"), (42, "--", "Fig. 1 construction")],
                       ylabel="loss / loss of predicting 0", fontsize=8)
    curve, compact, full = ax.get_lines()
    assert list(compact.get_xdata()) == [27, 27] and compact.get_linestyle() == ":"
    assert list(full.get_xdata()) == [42, 42] and full.get_linestyle() == "--"
    assert compact.get_color() == full.get_color() == "0.4"
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "hidden neurons"
    assert ax.get_ylabel() == "loss / loss of predicting 0"
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["loss", "compact construction", "Fig. 1 construction"]
    assert legend.get_texts()[0].get_fontsize() == 8
    plt.close(fig)


def test_finish_width_sweep_without_ylabel_leaves_the_y_axis_unlabelled():
    fig, ax = subplots()
    ax.plot([8, 16], [1.0, 0.5], label="curve")
    finish_width_sweep(ax, [(12, ":", "sparse")])
    assert ax.get_ylabel() == ""
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["curve", "sparse"]
    plt.close(fig)
