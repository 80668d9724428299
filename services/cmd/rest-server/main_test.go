package main

import (
	"testing"

	"github.com/wirelens/wirelens/services/internal/cli/clitest"
)

func TestRun(t *testing.T) { clitest.Server(t, run) }
