package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// The daemon's key and the groups' own credentials of modelTurns.
const (
	daemonKey = "sk-ant-daemon-key-0123456789"
	teamKey   = "sk-ant-team-key-0123456789"
	otherKey  = "sk-ant-other-key-0123456789"
)

// modelTurns runs turns through turn.Builder.Run with the real services (the model
// gateway on its socket, against a scripted Messages API, the store recording usage), and
// an agent in place of the container: a function that talks to the turn's model.sock with
// the token minted for its container.
type modelTurns struct {
	st      *store.Store
	fake    *fakemodel.Server
	builder *turn.Builder
}

// newModelTurns registers the groups (folder -> container config), parents first.
func newModelTurns(t *testing.T, groups map[string]string) *modelTurns {
	t.Helper()
	ctx := context.Background()
	// Not t.TempDir(): its name holds the test's, and a folder's router.sock under it
	// would pass the 107 bytes a unix socket's path may have.
	dir, err := os.MkdirTemp("", "mt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	layout, err := groupfolder.NewLayout(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(layout.DataDir, 0o755)
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	folders := slices.Collect(func(yield func(string) bool) {
		for f := range groups {
			if !yield(f) {
				return
			}
		}
	})
	slices.SortFunc(folders, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, f := range folders {
		parent, _ := groupfolder.Folder(f).Parent()
		if _, err := st.UpsertGroup(ctx, store.Group{Folder: f, Parent: string(parent), ContainerConfig: json.RawMessage(groups[f])}); err != nil {
			t.Fatal(err)
		}
	}
	creds := filepath.Join(dir, "credentials")
	os.MkdirAll(creds, 0o700)
	os.WriteFile(filepath.Join(creds, "team"), []byte(teamKey+"\n"), 0o600)
	os.WriteFile(filepath.Join(creds, "other"), []byte(otherKey+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "key"), []byte(daemonKey+"\n"), 0o600)
	fake := fakemodel.Start()
	t.Cleanup(fake.Close)
	log := slog.New(slog.DiscardHandler)
	model, err := turn.NewModelGateway(turn.ModelOptions{Upstream: fake.URL, APIKeyFile: filepath.Join(dir, "key"), CredentialsDir: creds}, layout, log)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.New(ctx, sidecar.Options{Engine: fakeengine.New(fakeengine.Script{}), Layout: layout, Instance: "model-test", Mode: sidecar.ModeEngine, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &modelTurns{st: st, fake: fake, builder: &turn.Builder{Layout: layout, Store: st, Logger: log,
		Services: &turn.Services{Store: st, Sidecars: sc, Model: model, Logger: log}}}
}

// agent is what runs in place of a turn's container.
type agent func(c *modelClient) string

// modelClient reaches a turn's model gateway as its container would.
type modelClient struct {
	t      *testing.T
	http   *http.Client
	token  string
	folder string
}

// answer is the gateway's answer to one request: its status, and its error's message.
type answer struct {
	code int
	msg  string
}

// ask sends a Messages request for model with maxTokens and a message of about size
// bytes.
func (c *modelClient) ask(model string, maxTokens, size int) answer {
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", size)}}})
	req, _ := http.NewRequest(http.MethodPost, "http://model/v1/messages", strings.NewReader(string(body)))
	req.Header.Set("X-Api-Key", c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{-1, err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Error struct{ Message string } }
	json.Unmarshal(b, &e)
	return answer{resp.StatusCode, e.Error.Message}
}

// run runs one recorded turn of folder with do as its agent; it returns the run and the
// turn's error.
func (m *modelTurns) run(t *testing.T, folder string, do agent) (*store.Run, error) {
	t.Helper()
	ctx := context.Background()
	r, err := m.st.CreateRun(ctx, store.Run{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := groupfolder.Parse(folder)
	_, err = m.builder.Run(ctx, turn.Request{RunID: r.ID, Folder: f, Recorded: true, Messages: []contract.Message{{Content: "go"}}},
		agentRunner{layout: m.builder.Layout, t: t, do: do}, turn.Watch{})
	got, gerr := m.st.GetRun(ctx, r.ID)
	if gerr != nil {
		t.Fatal(gerr)
	}
	return got, err
}

// agentRunner is a turn.Runner whose container is an agent function.
type agentRunner struct {
	layout groupfolder.Layout
	t      *testing.T
	do     agent
}

func (a agentRunner) Run(_ context.Context, tn runner.Turn) (runner.Result, error) {
	name := "arizuko-" + tn.Folder.ContainerSlug() + "-1"
	tn.OnCreated(name, "id-1")
	var token string
	for _, kv := range tn.ContainerEnv(name) {
		if v, ok := strings.CutPrefix(kv, "ARIZUKO_MODEL_TOKEN="); ok {
			token = v
		}
	}
	ipc, err := a.layout.IPCDir(tn.Folder)
	if err != nil {
		return runner.Result{}, err
	}
	sock := filepath.Join(ipc, "model.sock")
	c := &modelClient{t: a.t, token: token, folder: string(tn.Folder), http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 64,
	}}}
	return runner.Result{RunID: tn.RunID, Container: name, Output: contract.Output{Status: contract.StatusOK, Result: a.do(c)}}, nil
}

func (agentRunner) Adopt(context.Context, runner.Turn, string, time.Time) (runner.Result, error) {
	return runner.Result{}, errors.New("agentRunner adopts nothing")
}

// TestModelPolicyBindsTheSubtree: a group registered a child (with no container config of
// its own) and delegated to it; the child ran with any model, no request limit and the
// daemon's key. A group's model policy binds its whole subtree: the child gets its
// ancestor's credential, models, and limits, and can only narrow them.
func TestModelPolicyBindsTheSubtree(t *testing.T) {
	m := newModelTurns(t, map[string]string{
		"main":             `{"model":{"credential":"team","models":["claude-small","claude-big"],"requests_per_turn":3}}`,
		"main/kid":         `{}`,
		"main/kid/narrow":  `{"model":{"models":["claude-big","claude-other"],"requests_per_turn":10}}`,
		"main/kid/rogue":   `{"model":{"credential":"other"}}`,
		"main/kid/same":    `{"model":{"credential":"team","requests_per_turn":1}}`,
		"main/kid/nothing": `{"model":{"models":["claude-other"]}}`,
	})
	for _, tc := range []struct {
		folder string
		asks   []string // models asked for, one request each
		want   []int    // the statuses
		key    string   // the credential the upstream saw
	}{
		{"main/kid", []string{"claude-test", "claude-small", "claude-big", "claude-small", "claude-small"}, []int{403, 200, 200, 200, 403}, teamKey},
		{"main/kid/narrow", []string{"claude-small", "claude-other", "claude-big", "claude-big", "claude-big", "claude-big"}, []int{403, 403, 200, 200, 200, 403}, teamKey},
		{"main/kid/same", []string{"claude-small", "claude-small"}, []int{200, 403}, teamKey},
		{"main/kid/nothing", []string{"claude-other", "claude-small"}, []int{403, 403}, ""},
	} {
		t.Run(strings.ReplaceAll(tc.folder, "/", "_"), func(t *testing.T) {
			n := len(m.fake.Requests())
			var got []int
			if _, err := m.run(t, tc.folder, func(c *modelClient) string {
				for _, model := range tc.asks {
					got = append(got, c.ask(model, 10, 10).code)
				}
				return ""
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("statuses %v, want %v", got, tc.want)
			}
			for _, r := range m.fake.Requests()[n:] {
				if k := r.Header.Get("X-Api-Key"); k != tc.key {
					t.Errorf("the upstream got the key %q, want %q", k, tc.key)
				}
			}
		})
	}
	// A group that names another credential than its ancestor's does not run.
	_, err := m.run(t, "main/kid/rogue", func(*modelClient) string { return "" })
	if !errors.Is(err, turn.ErrBadContainerConfig) || !strings.Contains(err.Error(), `main/kid/rogue names "other", but main names "team"`) {
		t.Errorf("a group with another credential than its ancestor's: %v", err)
	}
}

// TestEffectiveModel reads the policy a folder's turns run under from the groups on its
// path.
func TestEffectiveModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups map[string]string
		folder string
		want   turn.EffectiveModel
		err    string
	}{
		{"none", map[string]string{"main": `{}`, "main/a": `{}`}, "main/a", turn.EffectiveModel{}, ""},
		{"unregistered ancestors", map[string]string{"main": `{"model":{"tokens_per_day":100}}`}, "main/a/b",
			turn.EffectiveModel{Budgets: []turn.Budget{{Folder: "main", TokensPerDay: 100}}}, ""},
		{"narrowed", map[string]string{
			"main":     `{"model":{"models":["a","b","c"],"tokens_per_day":1000,"requests_per_turn":5}}`,
			"main/x":   `{"model":{"models":["c","b","d"],"tokens_per_day":5000,"requests_per_turn":9,"credential":"k"}}`,
			"main/x/y": `{"model":{"tokens_per_day":10,"credential":"k"}}`,
		}, "main/x/y", turn.EffectiveModel{Credential: "k", Models: []string{"b", "c"}, RequestsPerTurn: 5,
			Budgets: []turn.Budget{{Folder: "main/x/y", TokensPerDay: 10}, {Folder: "main/x", TokensPerDay: 5000}, {Folder: "main", TokensPerDay: 1000}}}, ""},
		{"nothing in common", map[string]string{"main": `{"model":{"models":["a"]}}`, "main/x": `{"model":{"models":["b"]}}`}, "main/x",
			turn.EffectiveModel{Models: []string{}}, ""},
		{"inherited credential", map[string]string{"main": `{"model":{"credential":"k"}}`, "main/x": `{}`}, "main/x",
			turn.EffectiveModel{Credential: "k"}, ""},
		{"another credential", map[string]string{"main": `{"model":{"credential":"k"}}`, "main/x": `{"model":{"credential":"j"}}`}, "main/x",
			turn.EffectiveModel{}, `model.credential: main/x names "j", but main names "k"`},
		{"an ancestor's bad policy", map[string]string{"main": `{"model":{"tokens_per_day":-1}}`, "main/x": `{}`}, "main/x",
			turn.EffectiveModel{}, "group main, an ancestor of main/x: bad container config: model.tokens_per_day"},
		{"money budgets", map[string]string{
			"main":   `{"model":{"usd_per_day":2.5,"usd_per_month":40,"budget_action":"warn"}}`,
			"main/x": `{"model":{"usd_per_month":0.25}}`,
		}, "main/x", turn.EffectiveModel{Budgets: []turn.Budget{{Folder: "main/x", PerMonth: 250_000, Action: turn.BudgetRefuse},
			{Folder: "main", PerDay: 2_500_000, PerMonth: 40_000_000, Action: turn.BudgetWarn}}}, ""},
		{"a bad budget action", map[string]string{"main": `{"model":{"usd_per_day":1,"budget_action":"shout"}}`}, "main",
			turn.EffectiveModel{}, `model.budget_action: "shout" is not refuse, warn or park`},
		{"a budget action without a budget", map[string]string{"main": `{"model":{"tokens_per_day":5,"budget_action":"park"}}`}, "main",
			turn.EffectiveModel{}, `model.budget_action: "park" acts on usd_per_day or usd_per_month, and neither is set`},
		{"a negative budget", map[string]string{"main": `{"model":{"usd_per_month":-3}}`}, "main",
			turn.EffectiveModel{}, "model.usd_per_month: -3: must not be negative"},
		{"an ancestor's other keys", map[string]string{"main": `{"network":"nowhere","model":{"requests_per_turn":2}}`, "main/x": `{}`}, "main/x",
			turn.EffectiveModel{RequestsPerTurn: 2}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModelTurns(t, tc.groups)
			p, err := m.builder.Plan(context.Background(), groupfolder.Folder(tc.folder))
			switch {
			case tc.err != "":
				if !errors.Is(err, turn.ErrBadContainerConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one with %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case fmt.Sprintf("%#v", p.Model) != fmt.Sprintf("%#v", tc.want):
				t.Errorf("policy %#v,\nwant %#v", p.Model, tc.want)
			}
		})
	}
}

// burstAgent sends n Messages requests at once, each with maxTokens and a message of size
// bytes, and answers their statuses once all have been answered. The upstream holds each
// request it gets until every one of the n has either reached it or been refused: the
// requests are in flight together, as an agent's parallel tool calls are.
func burstAgent(m *modelTurns, n, maxTokens, size int) (agent, *[]answer) {
	var answers []answer
	arrived := make(chan struct{}, n)
	refused := make(chan struct{}, n)
	gate := make(chan struct{})
	m.fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		arrived <- struct{}{}
		select {
		case <-gate:
		case <-r.Done:
		}
		// The worst case the reservation allows for: every token of max_tokens used.
		return fakemodel.Reply{Text: "ok", OutputTokens: int64(maxTokens)}
	}
	return func(c *modelClient) string {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				a := c.ask("claude-test", maxTokens, size)
				if a.code != http.StatusOK {
					refused <- struct{}{}
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
		for range n {
			select {
			case <-arrived:
			case <-refused:
			}
		}
		close(gate)
		wg.Wait()
		return ""
	}, &answers
}

// tokensOf is what runs used of a daily budget: input, output and cache-write tokens.
func tokensOf(runs ...*store.Run) int64 {
	var n int64
	for _, r := range runs {
		n += r.Usage.InputTokens + r.Usage.OutputTokens + r.Usage.CacheWriteTokens
	}
	return n
}

// TestModelBudgetHoldsUnderParallelRequests: tokens_per_day was overshot by parallel
// requests (each passed the check before any had used anything). Every request reserves
// what it may use before it is forwarded, so the requests in flight together never exceed
// the budget: of 12 parallel requests only as many as their reservations fit are
// forwarded, whether the budget is the folder's own or an ancestor's, and what one
// folder's turns used is spent from its ancestors' budgets.
func TestModelBudgetHoldsUnderParallelRequests(t *testing.T) {
	const n, maxTokens, size = 12, 1000, 300
	// The reservation of one request: max_tokens and a token for every 3 bytes of its body.
	body, _ := json.Marshal(map[string]any{"model": "claude-test", "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", size)}}})
	reservation := int64(maxTokens + (len(body)+2)/3)
	const fit = 3
	limit := fit*reservation + reservation/2
	for _, tc := range []struct{ name, folder string }{{"own", "main"}, {"ancestor", "main/kid/deep"}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModelTurns(t, map[string]string{
				"main":          fmt.Sprintf(`{"model":{"tokens_per_day":%d}}`, limit),
				"main/kid":      `{}`,
				"main/kid/deep": `{"model":{"tokens_per_day":1000000}}`,
			})
			do, answers := burstAgent(m, n, maxTokens, size)
			run, err := m.run(t, tc.folder, do)
			if err != nil {
				t.Fatal(err)
			}
			var forwarded, refused int
			for _, a := range *answers {
				switch {
				case a.code == http.StatusOK:
					forwarded++
				case a.code == http.StatusForbidden && strings.Contains(a.msg, "budget reached: main and the groups below it") &&
					strings.Contains(a.msg, "tokens_per_day of main"):
					refused++
				default:
					t.Errorf("answered %d %q", a.code, a.msg)
				}
			}
			used := tokensOf(run)
			t.Logf("%d parallel requests reserving %d tokens each against %d: %d forwarded, %d refused; %d tokens used",
				n, reservation, limit, forwarded, refused, used)
			if forwarded != fit || used > limit {
				t.Errorf("%d forwarded using %d tokens of a budget of %d; want %d forwarded, at most the budget", forwarded, used, limit, fit)
			}
			// What was used below main is spent from main's budget: not enough is left for
			// one more request of main itself.
			var a answer
			if _, err := m.run(t, "main", func(c *modelClient) string { a = c.ask("claude-test", maxTokens, size); return "" }); err != nil {
				t.Fatal(err)
			}
			if a.code != http.StatusForbidden || !strings.Contains(a.msg, "tokens_per_day") {
				t.Errorf("main after its subtree used %d of its %d tokens: %d %q, want a 403 naming tokens_per_day", used, limit, a.code, a.msg)
			}
		})
	}
}
