# SPDX-License-Identifier: MIT
# The suite in other build types. Included by the top-level Makefile (after
# its own targets, so `all` stays the default goal); uses its JOBS,
# CMAKE_FLAGS, VENV, and deps and venv targets (the binding's pytest suite
# runs with the test venv's python, as in the default build).
#
#   make test-release      configure $(RELEASE_BUILD) as a Release build (no
#                          debug info: the gdb commands read the debug
#                          descriptor), build it, and run the suite without
#                          the Valgrind passes and without kbthreads.torch's
#                          (RELEASE_FLAGS): `make test` runs that against a
#                          Release library already, the installed wheel's
#                          (python_package); `make test` runs it
#   make test-build-types  the same pass in a Debug, a Release, a
#                          RelWithDebInfo and a MinSizeRel build, each in
#                          build-<type>/ (minutes; not part of `make test`)

RELEASE_BUILD ?= build-release
KB_BUILD_TYPES := Debug Release RelWithDebInfo MinSizeRel

.PHONY: test-release test-build-types $(addprefix test-build-type-,$(KB_BUILD_TYPES))

RELEASE_FLAGS ?= -DKB_TEST_TORCH=OFF

# $(call kb_build_type_pass,BUILD TYPE,FOLDER[,MORE CMAKE FLAGS])
define kb_build_type_pass
	cmake -S . -B $(2) -DCMAKE_BUILD_TYPE=$(1) -DKB_VALGRIND_TESTS=OFF -DKB_BUILD_TESTS=ON \
	      -DKB_FAULT_INJECTION=ON -DKB_BUILD_EXAMPLES=ON -DKB_TEST_PYTHON=$(abspath $(VENV))/bin/python $(CMAKE_FLAGS) $(3)
	cmake --build $(2) -j $(JOBS)
	cd $(2) && ctest --output-on-failure --no-tests=error -j $(JOBS) -LE valgrind
endef

test-release: deps venv
	$(call kb_build_type_pass,Release,$(RELEASE_BUILD),$(RELEASE_FLAGS))

test-build-types: $(addprefix test-build-type-,$(KB_BUILD_TYPES))

$(addprefix test-build-type-,$(KB_BUILD_TYPES)): test-build-type-%: deps venv
	$(call kb_build_type_pass,$*,build-$(shell echo $* | tr A-Z a-z))
