package runner

import (
	"github.com/arizuko/arizukod/runtime/engine"
)

// admit is the runner's last look at a turn's spec before the engine is asked: whatever
// the store held, the network passes engine.CheckNetwork with the operator's list and is
// one the engine has, the OCI runtime is one the operator allowed and the engine has (as
// far as it says), and the limits hold unless the operator allowed turns without them.
// It sets the network as the engines name it.
func (r *Runner) admit(s *engine.Spec) error {
	network, err := engine.CheckNetwork(s.Network, r.cfg.Networks)
	if err != nil {
		return err
	}
	info := r.info()
	if err := info.CheckNetwork(network); err != nil {
		return err
	}
	if err := engine.CheckRuntime(s.Runtime, r.cfg.Runtimes); err != nil {
		return err
	}
	if err := info.CheckRuntime(s.Runtime); err != nil {
		return err
	}
	if err := info.CheckLimits(r.cfg.AllowUnlimited); err != nil {
		return err
	}
	s.Network = network
	return nil
}
