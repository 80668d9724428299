package main

import (
	"testing"

	"github.com/wirelens/wirelens/internal/cli/clitest"
)

func TestRun(t *testing.T) { clitest.Server(t, run) }
