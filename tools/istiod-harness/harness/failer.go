package harness

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"istio.io/istio/pkg/log"
	"istio.io/istio/pkg/test"
)

// failer implements istio's test.Failer outside `testing`, so that
// pilot/test/xds.NewFakeDiscoveryServer (which reports setup errors through
// it and registers its shutdown as Cleanup functions) can run in a program.
// Fatal records the error and ends the calling goroutine (as testing.T does);
// Close runs the cleanups in reverse order.
type failer struct {
	mu       sync.Mutex
	failed   error
	cleanups []func()
	failedCh chan struct{}
}

var _ test.Failer = (*failer)(nil)

func newFailer() *failer { return &failer{failedCh: make(chan struct{})} }

func (f *failer) Fail()    { f.Fatal("fail called") }
func (f *failer) FailNow() { f.Fatal("fail now called") }

func (f *failer) Fatal(args ...any) {
	f.mu.Lock()
	if f.failed == nil {
		f.failed = errors.New(fmt.Sprint(args...))
		close(f.failedCh)
	}
	f.mu.Unlock()
	log.Errorf("istiod harness: fatal: %v", fmt.Sprint(args...))
	runtime.Goexit()
}

func (f *failer) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }
func (f *failer) Helper()                           {}
func (f *failer) Skip(args ...any)                  { f.Fatal(append([]any{"skip: "}, args...)...) }
func (f *failer) Log(args ...any)                   { log.Info(fmt.Sprint(args...)) }
func (f *failer) Logf(format string, args ...any)   { log.Infof(format, args...) }

func (f *failer) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *failer) TempDir() string {
	d, err := os.MkdirTemp("", "istiod-harness")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (f *failer) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// Close runs the registered cleanups, newest first.
func (f *failer) Close() {
	f.mu.Lock()
	c := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(c) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			c[i]()
		}()
	}
}
