package kube_test

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
)

// TestNonRootPod drives the engine alone on the test host's cluster with a non-root user,
// as a daemon of its own user would: the agent runs as that uid and gid, held to non-root
// by the kubelet, with no capabilities, and its answer comes over the attach stream,
// Inspect reading it exited at once.
func TestNonRootPod(t *testing.T) {
	k := enginetest.KubeCluster(t)
	pm := enginetest.Rootful(t)[0]
	peng, _ := pm.Open(t)
	image := enginetest.EnsureAgentImage(t, pm, peng)
	k.ImportImage(t, pm, image)
	e, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig, NoNetworkClass: k.NoNetworkClass, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := engine.Spec{
		Name: "arizuko-kube-nonroot-" + strconv.FormatInt(time.Now().UnixMilli(), 10), Image: image,
		Labels: map[string]string{engine.LabelInstance: "kube-e2e", engine.LabelFolder: "main/nonroot"},
		Env:    []string{"HOME=/tmp"}, Tmpfs: []engine.Tmpfs{{Target: "/tmp", Options: "size=16m"}},
		Network: engine.NetworkNone, MemoryBytes: 128 << 20, NanoCPUs: 1e9,
		User: "1000:1001", WorkingDir: "/tmp", Stdin: true, Timeout: time.Minute,
	}
	id, err := e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Remove(context.Background(), id)
	att, err := e.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	capture := &contract.Capture{}
	copied := make(chan error, 1)
	go func() { copied <- att.CopyOutput(capture, io.Discard) }()
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	in, err := contract.EncodeInput(contract.Input{RunID: "nonroot", Folder: "main/nonroot", Messages: []contract.Message{{Role: "user", Content: "sandbox"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := att.Stdin.Write(in); err != nil {
		t.Fatal(err)
	}
	att.Stdin.Close()
	<-copied
	st, err := e.Inspect(ctx, id)
	if err != nil || st.Running || st.Status != "exited" || st.ExitCode != 0 {
		t.Errorf("Inspect after the stream: %+v, %v; want exited 0 at once", st, err)
	}
	out, err := capture.Result()
	if err != nil || out.Status != contract.StatusOK {
		t.Fatalf("answer: %+v, %v", out, err)
	}
	var rep struct {
		UID, GID   int
		Caps       map[string]string
		NoNewPrivs string
		Writable   map[string]bool
	}
	if err := json.Unmarshal([]byte(out.Result), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.UID != 1000 || rep.GID != 1001 || rep.Caps["CapEff"] != "0000000000000000" || rep.NoNewPrivs != "1" || rep.Writable["/"] {
		t.Errorf("sandbox of a non-root Pod: %+v", rep)
	}
	list, err := e.List(ctx, map[string]string{engine.LabelFolder: "main/nonroot", engine.LabelInstance: "kube-e2e"})
	if err != nil || len(list) != 1 || list[0].Name != s.Name {
		t.Errorf("List = %+v, %v", list, err)
	}
}

// TestAdoptedPodNoOneAttachedEnds is a Pod whose central went after starting it and before
// its attach stream reached it (the central stopped or crashed in between): its agent
// waits on a one-shot stdin no one attached. The next central's engine, waiting for the
// adopted Pod, closes that stdin: the agent reads EOF and the Pod ends within seconds,
// where it waited for its run timeout before.
func TestAdoptedPodNoOneAttachedEnds(t *testing.T) {
	k := enginetest.KubeCluster(t)
	pm := enginetest.Rootful(t)[0]
	peng, _ := pm.Open(t)
	image := enginetest.EnsureAgentImage(t, pm, peng)
	k.ImportImage(t, pm, image)
	cfg := kube.Config{Kubeconfig: k.Kubeconfig, NoNetworkClass: k.NoNetworkClass, StopGrace: time.Second}
	e, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := engine.Spec{
		Name: "arizuko-kube-unattached-" + strconv.FormatInt(time.Now().UnixMilli(), 10), Image: image,
		Labels: map[string]string{engine.LabelInstance: "kube-e2e", engine.LabelFolder: "main/unattached"},
		Env:    []string{"HOME=/tmp"}, Tmpfs: []engine.Tmpfs{{Target: "/tmp", Options: "size=16m"}},
		Network: engine.NetworkNone, MemoryBytes: 128 << 20, NanoCPUs: 1e9,
		User: "1000:1001", WorkingDir: "/tmp", Stdin: true, Timeout: 10 * time.Minute,
	}
	id, err := e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Remove(context.Background(), id)
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The central goes here. The next one's engine adopts the Pod.
	next, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	began := time.Now()
	st, err := next.Wait(wctx, id)
	if err != nil || st.Running {
		t.Fatalf("Wait of the adopted Pod: %+v, %v after %s; want it ended, its stdin closed", st, err, time.Since(began).Round(time.Millisecond))
	}
	var logs strings.Builder
	if err := next.Logs(ctx, id, &logs, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Logf("the adopted Pod ended %s after the wait began: %s exit %d, %q", time.Since(began).Round(time.Millisecond), st.Status, st.ExitCode, logs.String())
}
