-- Sandbox test: the os library is not there, so this fails at load.
os.execute("touch /tmp/mmt_sandbox_escaped")
return {}
