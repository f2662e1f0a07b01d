"""Private continuous-time trajectories via noisy mean-field Langevin dynamics (method A).

Modules: :mod:`.data` (procedural data, MNIST-stroke loader, validation), :mod:`.declare`
(parameters and the declared privacy events; imports neither torch nor POT), :mod:`.noise`
(the noise/sampling interface), :mod:`.mfld` (the noisy particle dynamics, torch + POT),
:mod:`.objective` (its objective and clipping), :mod:`.private_grad` (its noisy gradient),
:mod:`.warm_start` (its private warm start), :mod:`.sinkhorn` (transport plans),
:mod:`.trajectories` (paths from composed transport plans), :mod:`.metrics` (W2 and figures),
:mod:`.plugin` (the ``trajectories`` method spec and hooks), :mod:`.report` (report section).
"""
