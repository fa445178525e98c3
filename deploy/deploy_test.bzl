"""deploy_test: one check of the deployment files, tests/<name>.py run as an sh_test."""

def deploy_test(name, args, data):
    native.sh_test(
        name = name,
        size = "small",
        srcs = ["tests/%s.py" % name],
        args = args,
        data = data + ["tests/common.py"],
    )
