package store

import (
	"context"
	"errors"
	"testing"
)

func TestPhases(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	r, err := s.CreateRun(ctx, Run{Folder: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.RunPhases(ctx, r.ID); p != nil || err != nil {
		t.Fatalf("phases before any turn: %+v, %v", p, err)
	}
	first := Phases{PrepareMS: 12, CreateMS: 40, StartMS: 90, RunMS: 1500, FinishMS: 3}
	second := Phases{PrepareMS: 10, SidecarsMS: 4, CreateMS: 1, StartMS: 80, RunMS: 700, FinishMS: 2}
	for _, want := range []Phases{first, second} {
		if err := s.SetPhases(ctx, r.ID, want); err != nil {
			t.Fatal(err)
		}
		if got, err := s.RunPhases(ctx, r.ID); err != nil || got == nil || *got != want {
			t.Fatalf("phases %+v, %v; want %+v", got, err, want)
		}
	}
	if err := s.SetPhases(ctx, "r_missing", first); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetPhases of no run: %v", err)
	}
	if _, err := s.RunPhases(ctx, "r_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RunPhases of no run: %v", err)
	}
}
