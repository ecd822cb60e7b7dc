// Package kube is the engine.Engine of Kubernetes, over client-go: one bare Pod per
// container (never a Job: the queue owns retries), created from an engine.Spec with the
// hardening every container gets (engine.Hardened) rendered as the Pod's securityContext.
//
// What it owns: the translation of a Spec into a Pod (PodFor), the labels and annotations
// that find arizukod's Pods again (label values Kubernetes cannot hold are kept exact in an
// annotation, and a selector-safe digest is the label), the contract's streams over the
// attach subresource (WebSocket, with SPDY as the fallback), the state of a Pod as the
// runner reads it, and the checks of a cluster that doctor makes (Check). It must not
// decide anything about a turn, and it talks to no other engine.
//
// Where Kubernetes differs from Podman, and what this engine does about it:
//   - A Pod's container starts when the Pod is created: the agent blocks on stdin until the
//     runner attaches, so Create starts nothing the turn can see. Start waits until the
//     container runs, marks the Pod started (the annotation StartedAnnotation) and sets
//     its activeDeadlineSeconds, so that a Pod prepared ahead is not killed by a deadline
//     counted from its creation; a Pod never started reads as "initialized".
//   - The end of a turn is the end of the attach stream: the Pod's status lags it by about
//     two seconds (the kubelet's PLEG and status sync). When the stream ended after the
//     contract's end marker, Inspect and Wait read the container as exited with code 0 at
//     once; otherwise they wait for the status, which gives the exit code, OOMKilled and
//     DeadlineExceeded.
//   - There is no signal API: Signal sends SIGTERM and SIGKILL as a deletion (with the
//     Pod's grace, with none) and answers every other signal errors.ErrUnsupported, so
//     steering (SIGUSR1) is refused rather than delivered late.
//   - Network "none" is a RuntimeClass whose Pods get no route out (Config.NoNetworkClass):
//     a Pod always has a network namespace. A missing class refuses the Pod. "bridge" is the
//     cluster's Pod network.
//   - The pids limit is the kubelet's podPidsLimit, one number per node for every Pod: the
//     operator declares it (Config.PodPidsLimit), a turn that asks for fewer is refused,
//     and without it Info.NoLimits says why. Rlimits have no field in a Pod: the runtime's
//     defaults apply. hostUsers is left unset (containerd 1.6 refuses false).
//   - Images are never pulled (imagePullPolicy Never) and cannot be imported over the API:
//     they are imported on each node (ctr -n k8s.io images import). ImageExists and ImageID
//     read the nodes' status.images, which the kubelet refreshes every few seconds.
package kube
