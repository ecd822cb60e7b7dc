package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// ScheduleKind says how a task's ScheduleExpr reads.
type ScheduleKind string

// Schedule kinds. The store keeps the expression verbatim; the scheduler
// parses it.
const (
	ScheduleCron     ScheduleKind = "cron"     // a 5-field cron expression
	ScheduleInterval ScheduleKind = "interval" // a duration in milliseconds
	ScheduleOnce     ScheduleKind = "once"     // an RFC 3339 time
)

// TaskState is a task's life: active tasks fire, paused ones wait, completed
// ones never fire again.
type TaskState string

// Task states.
const (
	TaskActive    TaskState = "active"
	TaskPaused    TaskState = "paused"
	TaskCompleted TaskState = "completed"
)

// Task is a scheduled prompt for a group. Its runs are runs of kind
// KindTask with TaskID set.
type Task struct {
	ID           string // "t_" + 16 hex digits unless the caller chose one
	Folder       string
	Prompt       string
	ScheduleKind ScheduleKind
	ScheduleExpr string
	State        TaskState
	NextRunAt    int64 // unix ms; 0 for none. An active task fires once it is due
	LastRunAt    int64 // unix ms; 0 before the first claim
	LastRunID    string
	CreatedAt    int64 // unix ms
	UpdatedAt    int64 // unix ms
}

// TaskFilter selects tasks for ListTasks. Zero fields match everything.
type TaskFilter struct {
	Folder  string
	Subtree bool // with Folder: also the tasks of its descendants
	State   TaskState
}

// TaskPatch changes the fields of a task that are not nil.
type TaskPatch struct {
	Prompt       *string
	ScheduleKind *ScheduleKind
	ScheduleExpr *string
	State        *TaskState
	NextRunAt    *int64
}

// TaskClaim is a task ClaimDueTasks claimed (as it is after the claim) and
// the run it queued for it.
type TaskClaim struct {
	Task Task
	Run  Run
}

func checkTask(t *Task) error {
	switch {
	case t.Folder == "":
		return fmt.Errorf("task: folder: %w: empty", ErrInvalid)
	case t.Prompt == "":
		return fmt.Errorf("task: prompt: %w: empty", ErrInvalid)
	case t.ScheduleKind != ScheduleCron && t.ScheduleKind != ScheduleInterval && t.ScheduleKind != ScheduleOnce:
		return fmt.Errorf("task: schedule kind: %w: %q is not cron, interval or once", ErrInvalid, t.ScheduleKind)
	case t.ScheduleExpr == "":
		return fmt.Errorf("task: schedule expr: %w: empty", ErrInvalid)
	case t.State != TaskActive && t.State != TaskPaused && t.State != TaskCompleted:
		return fmt.Errorf("task: state: %w: %q is not active, paused or completed", ErrInvalid, t.State)
	case t.NextRunAt < 0:
		return fmt.Errorf("task: next run at: %w: %d is negative", ErrInvalid, t.NextRunAt)
	case t.State == TaskActive && t.NextRunAt == 0:
		return fmt.Errorf("task: next run at: %w: an active task needs one", ErrInvalid)
	}
	return nil
}

const taskColumns = `id, folder, prompt, schedule_kind, schedule_expr, state, next_run_at, last_run_at,
	last_run_id, created_at, updated_at`

func queryTasks(ctx context.Context, q querier, query string, args ...any) ([]Task, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var (
			t               Task
			nextRun, lastAt sql.NullInt64
			lastID          sql.NullString
		)
		if err := rows.Scan(&t.ID, &t.Folder, &t.Prompt, &t.ScheduleKind, &t.ScheduleExpr, &t.State,
			&nextRun, &lastAt, &lastID, &t.CreatedAt, &t.UpdatedAt); err != nil {
			return nil, err
		}
		t.NextRunAt, t.LastRunAt, t.LastRunID = nextRun.Int64, lastAt.Int64, lastID.String
		out = append(out, t)
	}
	return out, rows.Err()
}

func getTask(ctx context.Context, q querier, id string) (*Task, error) {
	ts, err := queryTasks(ctx, q, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	return &ts[0], nil
}

// CreateTask stores t; State defaults to active, ID to "t_" + 16 hex digits.
// An active task needs NextRunAt. An ID in use is ErrConflict.
func (s *Store) CreateTask(ctx context.Context, t Task) (*Task, error) {
	if t.State == "" {
		t.State = TaskActive
	}
	if t.ID == "" {
		t.ID = newID("t_")
	}
	if err := checkTask(&t); err != nil {
		return nil, fmt.Errorf("store: create %w", err)
	}
	now := s.nowMS()
	_, err := s.db.ExecContext(ctx, `INSERT INTO tasks (`+taskColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)`,
		t.ID, t.Folder, s.redact(t.Prompt), t.ScheduleKind, t.ScheduleExpr, t.State, nullInt(t.NextRunAt), now, now)
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("store: create task %q: %w: id exists", t.ID, ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("store: create task %q: %w", t.ID, err)
	}
	return s.GetTask(ctx, t.ID)
}

// GetTask returns the task with the given id, or ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id string) (*Task, error) {
	t, err := getTask(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("store: get %w", err)
	}
	return t, nil
}

// ListTasks returns the tasks f selects, by folder and creation.
func (s *Store) ListTasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	var (
		where []string
		args  []any
	)
	switch {
	case f.Folder != "" && f.Subtree:
		where, args = append(where, underClause("folder")), append(args, underArgs(f.Folder)...)
	case f.Folder != "":
		where, args = append(where, "folder = ?"), append(args, f.Folder)
	}
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	query := `SELECT ` + taskColumns + ` FROM tasks`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	ts, err := queryTasks(ctx, s.db, query+` ORDER BY folder, created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list tasks: %w", err)
	}
	return ts, nil
}

// UpdateTask applies p to the task with the given id and returns it. Only
// the fields p sets change, so an update never undoes a concurrent claim's
// NextRunAt unless it sets NextRunAt itself. The result must be a valid task
// (an active task needs NextRunAt).
func (s *Store) UpdateTask(ctx context.Context, id string, p TaskPatch) (*Task, error) {
	var out *Task
	err := s.write(ctx, func(tx *sql.Tx) error {
		t, err := getTask(ctx, tx, id)
		if err != nil {
			return err
		}
		if p.Prompt != nil {
			t.Prompt = s.redact(*p.Prompt)
		}
		if p.ScheduleKind != nil {
			t.ScheduleKind = *p.ScheduleKind
		}
		if p.ScheduleExpr != nil {
			t.ScheduleExpr = *p.ScheduleExpr
		}
		if p.State != nil {
			t.State = *p.State
		}
		if p.NextRunAt != nil {
			t.NextRunAt = *p.NextRunAt
		}
		if err := checkTask(t); err != nil {
			return err
		}
		t.UpdatedAt = s.nowMS()
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET prompt = ?, schedule_kind = ?, schedule_expr = ?,
			state = ?, next_run_at = ?, updated_at = ? WHERE id = ?`, t.Prompt, t.ScheduleKind, t.ScheduleExpr,
			t.State, nullInt(t.NextRunAt), t.UpdatedAt, id); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: update task %q: %w", id, err)
	}
	return out, nil
}

// ClaimDueTasks fires the due tasks: the active tasks with NextRunAt <= now,
// oldest due first. In ONE transaction, for each it asks computeNext for the
// task's next due time (or whether it is completed), asks newRun for the run
// to queue (Kind, TaskID and Folder are set by the store; the rest is as
// CreateRun takes it), queues that run, and sets the task's NextRunAt (none
// once completed), State, LastRunAt = now and LastRunID.
//
// The guarantee: each due slot of a task is claimed at most once, and it is
// claimed exactly when its run row is created, because both commit together.
// A crash (or an error from a callback, or a failed insert) before the commit
// changes nothing, so the slot is still due and the next call claims it; a
// crash after it leaves the task moved on and its run queued, and a queued run
// survives restarts. Slots missed while the daemon was down yield one run per
// call, not one per slot: computeNext decides where the task goes next. A
// computeNext that returns a time not after now (for a task not completed) is
// an error, since the task would be due again at once.
func (s *Store) ClaimDueTasks(ctx context.Context, now int64,
	computeNext func(Task) (next int64, completed bool),
	newRun func(Task) Run,
) ([]TaskClaim, error) {
	var claims []TaskClaim
	err := s.write(ctx, func(tx *sql.Tx) error {
		due, err := queryTasks(ctx, tx, `SELECT `+taskColumns+` FROM tasks
			WHERE state = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ?
			ORDER BY next_run_at, id`, now)
		if err != nil {
			return err
		}
		created := s.nowMS()
		for _, t := range due {
			next, completed := computeNext(t)
			if !completed && next <= now {
				return fmt.Errorf("task %q: next run at: %w: %d is not after now (%d)", t.ID, ErrInvalid, next, now)
			}
			r := newRun(t)
			if r.Folder != "" && r.Folder != t.Folder {
				return fmt.Errorf("task %q: run folder: %w: %q is not the task's %q", t.ID, ErrInvalid, r.Folder, t.Folder)
			}
			if r.InboxFirst != 0 || r.InboxLast != 0 {
				return fmt.Errorf("task %q: run inbox range: %w: a task run has none", t.ID, ErrInvalid)
			}
			r.Folder, r.Kind, r.TaskID = t.Folder, KindTask, t.ID
			if err := checkNewRun(&r); err != nil {
				return fmt.Errorf("task %q: %w", t.ID, err)
			}
			if err := insertRun(ctx, tx, &r, created); err != nil {
				return fmt.Errorf("task %q: %w", t.ID, err)
			}
			if completed {
				t.State, t.NextRunAt = TaskCompleted, 0
			} else {
				t.NextRunAt = next
			}
			t.LastRunAt, t.LastRunID, t.UpdatedAt = now, r.ID, created
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = ?, next_run_at = ?, last_run_at = ?,
				last_run_id = ?, updated_at = ? WHERE id = ?`, t.State, nullInt(t.NextRunAt), t.LastRunAt,
				t.LastRunID, t.UpdatedAt, t.ID); err != nil {
				return err
			}
			stored, err := getRun(ctx, tx, r.ID)
			if err != nil {
				return err
			}
			claims = append(claims, TaskClaim{Task: t, Run: *stored})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim due tasks: %w", err)
	}
	return claims, nil
}
