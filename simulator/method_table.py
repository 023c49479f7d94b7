"""The light table of the registered methods: every field of each entry but its functions.

Generated from the ``METHODS`` of the modules of :data:`simulator.methods.METHOD_MODULES` by
``python -m simulator.methods``; do not edit. :mod:`simulator.methods` builds the entries of these
modules from it without importing them (no kernels, no numba), and checks it against a module's
own entries when the module is loaded (tests/test_registry.py checks all of them).
"""

TABLE = {
    'simulator.baselines.compiled': (
        {'name': 'sequential', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'sequential_2', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'sequential_4', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'sequential_8', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'sequential_16', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'sequential_32', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'sequential_64', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'sequential', 'sets': ('all', 'baselines', 'baseline_only', 'seq'), 'callables': ('rule',)},
        {'name': 'uniform', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'static', 'sets': ('all', 'baselines', 'baseline_only', 'static'), 'callables': ('rule',)},
        {'name': 'random', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'static', 'sets': ('all', 'baselines', 'baseline_only', 'static'), 'callables': ('rule',)},
        {'name': 'latency_weighted', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'static', 'sets': ('all', 'baselines', 'baseline_only', 'static'), 'callables': ('rule',)},
        {'name': 'success_rate_weighted', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'static', 'sets': ('all', 'baselines', 'baseline_only', 'static'), 'callables': ('rule',)},
        {'name': 'critical_path_static', 'kind': 'compiled_baseline', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'static', 'sets': ('all', 'baselines', 'baseline_only', 'static'), 'callables': ('rule',)},
    ),
    'simulator.mcpp.policy': (
        {'name': 'mc_portfolio_rollout', 'kind': 'python_policy', 'launch': 'atomic', 'deadline': 'hard', 'baseline': False, 'family': 'mcpp', 'label': 'MCPP', 'aliases': ('MCPP',), 'sets': ('all', 'mcpp', 'loader_only'), 'settings_key': 'mcpp', 'variant_words': {'crn': ('evaluation', 'crn'), 'halving': ('evaluation', 'halving'), 'crn_halving': ('evaluation', 'crn_halving'), 'corrected': ('candidate_generator', 'corrected'), 'reuse': ('reuse', 'state')}, 'launch_param': 'launch_rule', 'description': 'Monte Carlo Portfolio Planning', 'display_label': 'MCPP', 'callables': ('factory', 'check_params', 'check_dag')},
    ),
    'simulator.baselines.further.policies': (
        {'name': 'loader_static', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_all_paths', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_colgen', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_bf', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_bf', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'deadline_static', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'hard', 'baseline': True, 'family': 'further_deadline', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'deadline_receding', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'hard', 'baseline': True, 'family': 'further_deadline', 'sets': ('further',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_units', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_units', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_all_paths_units', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_colgen_units', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_bf_units', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_bf_units', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_rcur0', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_bf_rcur0', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_clamp', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_clamp', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_all_paths_clamp', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_colgen_clamp', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_bf_clamp', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_bf_clamp', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_lambert1', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_lambert1', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_all_paths_lambert1', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_colgen_lambert1', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_bf_lambert1', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_bf_lambert1', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'deadline_static_kappa', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'hard', 'baseline': True, 'family': 'further_deadline', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'deadline_receding_kappa', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'hard', 'baseline': True, 'family': 'further_deadline', 'sets': ('further_corrections',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_all_paths_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_colgen_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_static_bf_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'loader_dual_bf_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'family': 'further_loader', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'deadline_static_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'hard', 'baseline': True, 'family': 'further_deadline', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
        {'name': 'deadline_receding_fixed', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'hard', 'baseline': True, 'family': 'further_deadline', 'sets': ('further_fixed',), 'settings_key': 'further', 'callables': ('factory',)},
    ),
    'simulator.policies.cheapest_first': (
        {'name': 'cheapest_first', 'kind': 'python_policy', 'launch': 'per_attempt', 'deadline': 'scored', 'baseline': True, 'sets': ('examples',), 'callables': ('factory',)},
    ),
}
