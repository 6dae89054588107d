"""What tplab keeps on this machine: where its state lives (``paths``: TPLAB_HOME), the mock
clouds running here (``mock_clouds``) and the lab folders written outside TPLAB_HOME
(``lab_folders``). Client side; standard library only.
"""
